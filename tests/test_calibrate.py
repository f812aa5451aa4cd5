"""validation.calibrate in its small CPU form: every probe measures something and the profile it
writes loads as a hardware spec whose figures are the measured ones."""
import dataclasses
from pathlib import Path

import pytest

from sim.cost import KERNELS_PER_LAYER
from sim.hardware import hardware_from_node
from sim.specio import Node
from validation.calibrate import main, measure
from validation.profile import profile_yaml

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def small_figures(one_torch_thread):
    """The small form's figures, measured once for the tests that read them (about 35 s here)."""
    return measure(size_mb=16, gemm_n=128, repeats=2, geometries=[(2, 2, 64)])


def test_small_calibration_writes_a_loadable_profile(tmp_path, small_figures):
    """The small form measures every figure and writes a profile that reads back to them, to the
    precision the profile writes. Figures that are differences of two timed calls are clamped at
    0 and can read 0 on a loaded host (a test run beside others), so only their sign is checked."""
    m = small_figures
    for key in ("copy_bw", "stream_bw", "flops_fp32", "launch_s", "layer_s", "probe_layer_s", "step_s", "seq_s",
                "alloc_op_s", "multi_query_s", "tree_row_s", "draft_first_s", "draft_pass_s", "draft_seq_s", "draft_pass_seq_s", "draft_node_s", "pass_s", "index_check_s", "mixed_query_s",
                "batch_query_s", "fused_query_s", "fused_key_s", "elementwise_s", "logit_s", "draft_logit_s",
                "draft_cand_s", "tree_call_s", "tree_node_s", "pack_node_s", "spec_step_s", "spec_seq_s", "ngram_call_s", "ngram_seq_s",
                "medusa_first_s", "medusa_seq_s", "medusa_node_s"):
        assert m[key] >= 0, key
    assert m["rounds"] == 2
    assert 0 < m["eta_attn"] <= 1 and m["attn_dense"] is True
    assert m["elementwise_s"] < 1e-7 and m["logit_s"] < 1e-7 and m["draft_logit_s"] < 1e-7
    assert m["draft_cand_s"] < 1e-3 and m["pack_node_s"] < 1e-3
    # matmul curves at the small form's two sizes (32, 128 KiB) and rows 1, 4, 16: positive rates
    assert sorted(m["gemm_rows"]) == [32, 128]
    assert all([r for r, _ in c] == [1, 4, 16] and all(f > 0 for _, f in c) for c in m["gemm_rows"].values())
    # and warm (weights in the last-level cache) where this host says how large that is
    from validation.probes import last_level_cache_bytes
    assert m["cache_bytes"] == last_level_cache_bytes()
    if m["cache_bytes"]:
        assert [mib for mib, _ in m["kv_sizes_warm"]] == [0.5, 2, 8, 32, 128] and all(0 < e <= 1 for _, e in m["kv_sizes_warm"])
        assert sorted(m["gemm_rows_warm"]) == [32, 128]
        assert all([r for r, _ in c] == [1, 4, 16] and all(f > 0 for _, f in c) for c in m["gemm_rows_warm"].values())
    assert 1e8 < m["copy_bw"] < 1e12 and 1e8 < m["flops_fp32"] < 1e13
    # the gather at 0.5 to 128 MiB a call, each a rate in (0, 1] of the streaming rate
    assert [mib for mib, _ in m["kv_sizes"]] == [0.5, 2, 8, 32, 128] and all(0 < e <= 1 for _, e in m["kv_sizes"])
    # the family geometry's decode attention at the same sizes, cold and (where known) warm
    assert list(m["kv_decode"]) == ["2x2x64"] and list(m["kv_decode_warm"]) == (["2x2x64"] if m["cache_bytes"] else [])
    for curve in (*m["kv_decode"].values(), *m["kv_decode_warm"].values()):
        assert [mib for mib, _ in curve] == [0.5, 2, 8, 32, 128] and all(0 < e <= 1 for _, e in curve)
    # the fused call's per-key part at each of its rows and two sizes, ns, none negative
    from validation.probes import FUSED_ROWS
    assert len(m["fused_rows"]) == 2 and all(mib > 0 for mib in m["fused_rows"])
    for curve in m["fused_rows"].values():
        assert [r for r, _ in curve] == list(FUSED_ROWS) and all(0 <= x < 1e5 for _, x in curve)
    # and in a sequence's call of its own, at one size
    from validation.probes import OWN_ROWS
    assert len(m["fused_own"]) == 1
    for curve in m["fused_own"].values():
        assert [r for r, _ in curve] == list(OWN_ROWS) and all(0 <= x < 1e5 for _, x in curve)
    # the elementwise passes at 64 to 4,096 tokens of the family's layer: positive times per element
    assert len(m["elementwise_sizes"]) == 4 and all(0 < x < 100 for _, x in m["elementwise_sizes"])
    # a verification call is a whole call: microseconds at least
    assert 1e-6 < m["verify_call_s"] < 1e-2
    path = tmp_path / "cpu-measured.yaml"
    path.write_text(profile_yaml(m, "test CPU", 8, "test"))
    hw = hardware_from_node(Node(str(path), None, "hardware"), Path("."))
    assert hw.peak("fp32") == pytest.approx(m["flops_fp32"], rel=1e-3)
    assert hw.mem_bw * hw.eta_memory == pytest.approx(m["stream_bw"], rel=1e-3)
    # each field to half a unit in the last place the profile writes (us, ns or a fraction)
    us1, us2, us3, ns3, ns4 = 0.5e-7, 0.5e-8, 0.5e-9, 0.5e-12, 0.5e-13
    for field, key, half in (("step_overhead_s", "step_s", us1), ("draft_seq_s", "draft_seq_s", us1),
                             ("draft_first_s", "draft_first_s", us1), ("draft_pass_s", "draft_pass_s", us1),
                             ("draft_pass_seq_s", "draft_pass_seq_s", us1), ("draft_node_s", "draft_node_s", us2),
                             ("pass_overhead_s", "pass_s", us1), ("index_check_s", "index_check_s", us1),
                             ("tree_row_s", "tree_row_s", us1),
                             ("mixed_query_s", "mixed_query_s", us1), ("fused_query_s", "fused_query_s", us3),
                             ("fused_key_s", "fused_key_s", ns3), ("elementwise_s", "elementwise_s", ns4),
                             ("logit_s", "logit_s", ns4), ("draft_logit_s", "draft_logit_s", ns4),
                             ("draft_cand_s", "draft_cand_s", us3), ("verify_call_s", "verify_call_s", us1),
                             ("tree_call_s", "tree_call_s", us1), ("tree_node_s", "tree_node_s", us3),
                             ("pack_node_s", "pack_node_s", us3), ("ngram_call_s", "ngram_call_s", us1),
                             ("ngram_seq_s", "ngram_seq_s", us2), ("medusa_first_s", "medusa_first_s", us1),
                             ("medusa_seq_s", "medusa_seq_s", us1), ("medusa_node_s", "medusa_node_s", us2)):
        assert getattr(hw, field) == pytest.approx(m[key], rel=1e-9, abs=half * 1.001), field
    assert hw.launch_s == pytest.approx(m["layer_s"] / KERNELS_PER_LAYER, rel=1e-9, abs=us2 * 1.001)
    assert hw.eta_attn == pytest.approx(m["eta_attn"], abs=0.5e-4 * 1.001) and hw.attn_dense
    assert hw.kv_sizes == tuple((mib * 2**20, e) for mib, e in m["kv_sizes"])
    assert [n for n, _ in hw.elementwise_sizes] == pytest.approx([e * 1e6 for e, _ in m["elementwise_sizes"]])
    assert [x for _, x in hw.elementwise_sizes] == pytest.approx([x * 1e-9 for _, x in m["elementwise_sizes"]])
    assert [b for b, _ in hw.gemm_rows] == [32 * 1024, 128 * 1024]
    assert hw.gemm_rows[0][1] == tuple((r, f) for r, f in m["gemm_rows"][32])
    if m["cache_bytes"]:
        assert hw.gemm_rows_warm[1][1] == tuple((r, f) for r, f in m["gemm_rows_warm"][128])
        assert hw.cache_bytes == m["cache_bytes"]
        assert hw.kv_sizes_warm == tuple((mib * 2**20, e) for mib, e in m["kv_sizes_warm"])
        assert hw.kv_decode_warm == (((2, 2, 64), tuple((mib * 2**20, e) for mib, e in m["kv_decode_warm"]["2x2x64"])),)
    assert hw.kv_decode == (((2, 2, 64), tuple((mib * 2**20, e) for mib, e in m["kv_decode"]["2x2x64"])),)
    for key in ("fused_rows", "fused_own"):
        assert [b for b, _ in getattr(hw, key)] == pytest.approx(sorted(mib * 2**20 for mib in m[key]))
        for (b, curve) in getattr(hw, key):
            want = m[key][round(b / 2**20, 2)]
            assert [r for r, _ in curve] == [r for r, _ in want]
            assert [x for _, x in curve] == pytest.approx([x * 1e-9 for _, x in want])


def test_cli_writes_where_asked(tmp_path, capsys, monkeypatch, small_figures):
    """The command line's sizes, rounds and context reach the measurement, and its figures are
    written where --out says. The measurement itself is the small form's (small_figures): the
    command runs whole, probes and all, in validation/gpu.sh's CPU form (tests/test_gpu_script.py)."""
    import torch

    import validation.calibrate as calibrate
    from validation.calibrate import context_model
    from validation.profile import write_profile
    device = "cuda" if torch.cuda.is_available() else "cpu"
    asked = []
    monkeypatch.setattr(calibrate, "measure", lambda *a: asked.append(a) or small_figures)
    out = tmp_path / "x.yaml"
    assert main(["--out", str(out), "--size-mb", "8", "--gemm", "64", "--repeats", "1"]) == 0
    assert asked == [(8, 64, 1, device, context_model("tiny"))]
    assert out.read_text() == write_profile(small_figures, 8) and out.read_text().startswith("# Measured by")
    assert f"wrote {out}" in capsys.readouterr().out
    assert main(["--out", str(out), "--context", "none", "--repeats", "2"]) == 0
    assert asked[1] == (512, 1024, 2, device, None)


def replay_after_first_call(cal) -> None:
    """Each of `cal`'s probes runs once, its later calls returning that call's result: a test of
    the cycle's bookkeeping over several cycles pays for one cycle of the host's time."""
    first: dict = {}

    def replayed(key, probe):
        def call():
            if key not in first:
                first[key] = probe()
            return first[key]
        return call
    cal.probes = {key: replayed(key, probe) for key, probe in cal.probes.items()}


def test_ticks_run_the_cycle_a_few_probes_at_a_time():
    """`tick` runs the next probes of the round-robin cycle (what runs between the measurements a
    profile predicts), `complete` finishes the cycle so every probe has as many calls; a probe
    called twice a round (probe_calls) pools its calls' figures."""
    from validation.calibrate import Calibration
    cal = Calibration(size_mb=8, gemm_n=64, probe_calls={"engine": 2})
    replay_after_first_call(cal)
    order = cal._order
    assert set(order) == set(cal.probes) and ("engine", 1) in order and len(order) == len(set(order))
    cal.tick(3)
    assert [cal.calls[k] for k in order] == [1, 1, 1] + [0] * (len(order) - 3)
    assert set(cal.samples) == set(order[:3])  # single figures so far
    cal.complete()
    engine = {"engine1", "engine16"}  # the engine probe's figures: two calls a round

    def sampled(n):
        return ({len(v) for k, v in cal.samples.items() if k not in engine} == {n}
                and {len(cal.samples[k]) for k in engine} == {2 * n})
    assert set(cal.calls.values()) == {1} and sampled(1)
    cal.complete()  # a finished cycle stays as it is
    assert set(cal.calls.values()) == {1}
    cal.tick(len(order) + 2)  # wraps round: a second call of every probe, a third of the first two
    assert [cal.calls[k] for k in order[:3]] == [3, 3, 2]
    cal.complete()
    assert sampled(3)
    assert cal.figures()["rounds"] == 3
    boot = cal.bootstrap(3)  # the figures of resampled calls: the same fields, their own values
    assert len(boot) == 3 and all(set(m) == set(cal.figures()) for m in boot)
    # paired probes give every figure of the pair from one call
    assert {"forward1", "forward6", "verifies6", "engine16", "dhost_mtp_b1", "logits1024", "attn16x64c1024v", "attn4x128c0p", "layer6", "dhost5b16",
            "unchecked1", "drafter1"} <= set(cal.samples)
    between = cal.spread(5, 2)  # five calls make two whole cycles, with nothing left for `complete`
    for _ in range(5):
        between()
    assert cal._next == 0 and set(cal.calls.values()) == {5}


def test_a_spreads_calls_share_its_cycles_exactly():
    """Each call runs its rounded share of the probes (at least one): any number of calls runs
    their total share rounded, so a whole number of cycles ends on a cycle's end."""
    from validation.calibrate import share_of_call
    for per_call, calls in ((392 / 3, 15), (800 / 18, 144), (87.1, 10), (1.0, 7)):
        shares = [share_of_call(i, per_call) for i in range(calls)]
        assert sum(shares) == round(per_call * calls) and max(shares) - min(shares) <= 1
        assert all(sum(shares[:n]) == int(per_call * n + 0.5 + 1e-9) for n in range(calls + 1))
    assert [share_of_call(i, 0.4) for i in range(4)] == [1, 1, 1, 1]  # fewer probes than calls: one each


def test_interleaved_times_alternate_the_calls():
    """One untimed round, then the timed calls, alternating one by one."""
    from validation.timing import interleaved_times
    log = []
    got = interleaved_times({"a": lambda: log.append("a"), "b": lambda: log.append("b")}, "cpu", 3)
    assert log == ["a", "b"] * 4 and set(got) == {"a", "b"} and all(t >= 0 for t in got.values())


def test_block_times_run_each_call_in_a_block_and_average_what_it_returns():
    """Calls that time their own part: one untimed call, then the timed ones back to back, one
    name after the other; each name's figure is the mean of the seconds its calls returned."""
    from validation.timing import block_times
    log, seconds = [], {"a": iter([9.0, 1.0, 3.0]), "b": iter([9.0, 2.0, 6.0])}

    def call(name):
        log.append(name)
        return next(seconds[name])
    got = block_times({"a": lambda: call("a"), "b": lambda: call("b")}, 2)
    assert log == ["a"] * 3 + ["b"] * 3
    assert got == {"a": 2.0, "b": 4.0}


def test_the_elementwise_probe_times_its_passes_between_the_layers_products():
    """The probe runs a layer's weight products and returns the seconds of its elementwise passes
    alone: at 1,024 tokens the products take most of the call (2 x 1,024 x 786k FLOPs against
    3.7M elements of passes), and the passes grow with the tokens."""
    import time
    from validation.probes import elementwise_probe
    small, large = elementwise_probe("cpu", 16), elementwise_probe("cpu", 1024)
    small(), large()
    walls, passes = [], []
    for _ in range(3):
        t0 = time.perf_counter()
        passes.append(large())
        walls.append(time.perf_counter() - t0)
    assert 0.0 < min(passes) and max(p / w for p, w in zip(passes, walls)) < 0.8
    assert min(passes) > 4 * min(small() for _ in range(3))


def test_steady_time_waits_until_repeating_stops_making_a_call_faster(monkeypatch):
    """A call that settles over its first passes (as a pool of weights settles into the cache) is
    timed once a pass is no more than 3% faster than the one before, as the mean of those two,
    after `least` calls (6) at least; one that never settles stops at `most` calls. The calls'
    durations are given on a fake clock, so the test does not depend on this host's timing."""
    import types

    import validation.timing as timing

    clock = [0.0]
    monkeypatch.setattr(timing, "time", types.SimpleNamespace(perf_counter=lambda: clock[0]))

    def settling(durations):
        it = iter(durations)
        calls = []

        def fn():
            calls.append(1)
            clock[0] += next(it)
        return fn, calls

    fn, calls = settling([0.040, 0.039, 0.030, 0.020, 0.010, 0.008, 0.0079, 1.0])
    t = timing.steady_time(fn, "cpu")  # a plateau over the first passes does not end it
    assert len(calls) == 7 and t == pytest.approx((0.008 + 0.0079) / 2)
    fn, calls = settling([0.004] * 6 + [1.0])
    assert timing.steady_time(fn, "cpu") == pytest.approx(0.004) and len(calls) == 6
    fn, calls = settling([0.004, 0.004, 0.004, 1.0])
    timing.steady_time(fn, "cpu", least=3)
    assert len(calls) == 3
    fn, calls = settling([0.002 * 0.8 ** i for i in range(30)])
    timing.steady_time(fn, "cpu", most=9)
    assert len(calls) == 9


def test_attention_figures_recover_the_rate_and_costs_they_were_built_from():
    """Probe times built from a known products rate over each sequence's queries x gathered keys,
    a cost per query head, a cost per key (its reading at the gather rate and more per query
    head) and a fixed cost per call give the rate and the two costs back; a part that would
    read negative reads 0, and a rate above the peak is held at it."""
    from validation.probes import ATTN_CALLS, ATTN_HEADS, KV_DIM, KV_HEADS, attention_figures, attention_key
    peak, gather, eta, per_query, per_key = 100e9, 2e9, 0.3, 1.5e-6, 20e-9
    read = 2 * (KV_HEADS // 4) * KV_DIM * 4 / gather

    def times(query_s, key_s, rate=eta, fixed=1e-3):
        def t(s, n, ctx):
            keys = s * (ctx + n)
            return fixed + keys * (read + ATTN_HEADS * key_s) \
                + 4 * ATTN_HEADS * KV_DIM * s * n * (ctx + n) / (rate * peak) + s * n * ATTN_HEADS * query_s
        return {attention_key(*a): t(*a[:3]) for a in ATTN_CALLS}

    assert attention_figures(times(per_query, per_key), gather, peak) == pytest.approx((eta, per_query, per_key), rel=1e-6)
    assert attention_figures(times(0.0, 0.0), gather, peak) == pytest.approx((eta, 0.0, 0.0), abs=1e-12)
    # products faster than the peak: the rate held at 1, the other parts fitted beside it
    got = attention_figures(times(per_query, per_key, rate=2.0), gather, peak)
    assert got[0] == 1.0 and all(x >= 0 for x in got)
    # the extra time no more than the extra reads: products are not what limits it
    flat = {k: 1e-3 for k in times(0.0, 0.0)}
    assert attention_figures(flat, gather, peak)[0] == 1.0


@pytest.mark.parametrize("own", [False, True])
def test_fused_rows_curve_recovers_the_per_key_parts_it_was_built_from(own):
    """Rows probe times built from a fixed part per call, a part per query head, the keys' reading
    at the gather rate, their products at a known rate and a per-key part that is not linear in the
    rows give that per-key part back at every rows (to the 0.01 ns the figure keeps); a part below 0
    (products priced slower than they ran) reads 0. Both the group call's table and the own call's
    (OWN_SIZES, OWN_ROWS)."""
    from validation import probes
    from validation.probes import ATTN_HEADS, KV_DIM, KV_HEADS, fused_rows_curve, rows_key
    sizes, all_rows = (probes.OWN_SIZES, probes.OWN_ROWS) if own else (probes.ROWS_SIZES, probes.FUSED_ROWS)
    gather, per_flop = 2e9, 1 / 30e9
    read = 2 * (KV_HEADS // 4) * KV_DIM * 4 / gather / ATTN_HEADS  # a key, per query head
    def true(n, r):  # odd rows dearer, a rise past 32 rows, more at the larger size
        return (60 + 25 * (r % 2) + (r > 32) * r + n) * 1e-9

    def times(part):
        return {rows_key(n, r, c): 2e-3 + n * r * ATTN_HEADS * 1e-6
                + ATTN_HEADS * n * (c + r) * (read + r * 4 * KV_DIM * per_flop + part(n, r))
                for n, contexts in sizes for r in all_rows for c in contexts}

    got = fused_rows_curve(times(true), gather, per_flop, sizes, all_rows)
    key_mib = 2 * (KV_HEADS // 4) * KV_DIM * 4 / 2**20
    assert list(got) == [round(n * (lo * hi) ** 0.5 * key_mib, 2) for n, (lo, hi) in sizes]
    for (n, _), curve in zip(sizes, got.values()):
        assert [r for r, _ in curve] == list(all_rows)
        assert [x for _, x in curve] == pytest.approx([true(n, r) * 1e9 for r in all_rows], abs=0.006)
    below = fused_rows_curve(times(lambda n, r: -r * 4 * KV_DIM * per_flop), gather, per_flop, sizes, all_rows)
    assert all(x == 0.0 for curve in below.values() for _, x in curve)


def test_fit_parts_keeps_parts_non_negative():
    """fit_parts: an exact system comes back exactly; a part the data would make negative is
    held at 0 (the fixed first part may take any sign); held parts stay as given."""
    import numpy as np
    from validation.probes import fit_parts
    rows = np.array([[1, 1, 0], [1, 2, 1], [1, 3, 4], [1, 5, 2]], dtype=float)
    x = np.array([-0.5, 2.0, 3.0])
    assert fit_parts(rows, rows @ x) == pytest.approx(x)
    y = rows @ np.array([1.0, 2.0, 0.0]) - rows[:, 2] * 0.3  # the third part negative
    got = fit_parts(rows, y)
    assert got[2] == 0.0 and got[1] > 0
    assert fit_parts(rows, rows @ x, fixed={2: 3.0}) == pytest.approx(x)


def test_gather_curve_takes_rates_between_sizes():
    """kv_size_curve: gathers timed as a fixed part plus their bytes at one rate up to a middle
    size and at another beyond give eta_kv at each size with the fixed part left out."""
    from validation.probes import KV_MIDDLE, KV_SIZES, kv_gather_bytes, kv_key, kv_size_curve
    bw, r1, r2, fixed = 10e9, 4e9, 3e9, 3e-4
    sizes = [kv_gather_bytes(*size) for size in KV_SIZES]
    assert [b / 2**20 for b in sizes] == [0.5, 2, 8, 32, 128] and sizes[KV_MIDDLE] == 32 * 2**20
    mid = sizes[2]
    times = [fixed + min(b, mid) / r1 + max(0, b - mid) / r2 for b in sizes]
    curve = kv_size_curve({kv_key("kv", *size): t for size, t in zip(KV_SIZES, times)}, bw)
    want = [0.4, 0.4, 0.4] + [b / (mid / r1 + (b - mid) / r2) / bw for b in sizes[3:]]
    assert [m for m, _ in curve] == [0.5, 2, 8, 32, 128]
    assert [e for _, e in curve] == pytest.approx(want, abs=1e-4)
    # a gather far slower than streaming still writes a positive rate (the profile needs one)
    assert [e for _, e in kv_size_curve({kv_key("kv", *size): t * 1e6 for size, t in zip(KV_SIZES, times)}, bw)] \
        == [1e-4] * len(KV_SIZES)
    # a rate above the streaming rate is held at 1
    assert kv_size_curve({kv_key("kv", *size): t / 100 for size, t in zip(KV_SIZES, times)}, bw)[0][1] == 1.0


def test_drafter_host_figures_are_lines_through_the_probes_batch_sizes():
    """A first pass's fixed part and part per sequence from the MTP probe's two batch sizes; a
    later pass's from the deep chain's beyond the one-pass chain's, per extra pass; the tree's
    beyond the deep chain's per further node (2, 3, 4, 2 nodes at its levels: 7 a sequence).
    Each clamped at 0; the per-row ones less the logit work of a row of their probe's
    vocabulary, priced in the pass."""
    from validation.drafter_host import DRAFT_PASS_DEPTHS, DRAFT_PASS_SEQS, draft_node_rows, drafter_host_figures
    assert draft_node_rows() == 7
    first, first_seq, later, later_seq, node = 250e-6, 70e-6, 120e-6, 35e-6, 13e-6
    t = {f"dhost_mtp_b{b}": first + b * first_seq for b in DRAFT_PASS_SEQS}
    t |= {f"dhost{d}b{b}": first + b * first_seq + (d - 1) * (later + b * later_seq)
          for d in DRAFT_PASS_DEPTHS for b in DRAFT_PASS_SEQS}
    b, d = DRAFT_PASS_SEQS[1], DRAFT_PASS_DEPTHS[1]
    t["dhost_node"] = t[f"dhost{d}b{b}"] + b * 7 * node
    got = drafter_host_figures(t)
    want = {"draft_first_s": first, "draft_seq_s": first_seq, "draft_pass_s": later, "draft_pass_seq_s": later_seq,
            "draft_node_s": node}
    assert got == pytest.approx(want, rel=1e-9)
    flat = {k: 1e-3 for k in t}  # nothing grows: no part per sequence, pass or node; the fixed part all of it
    assert drafter_host_figures(flat) == pytest.approx({"draft_first_s": 1e-3, "draft_seq_s": 0.0, "draft_pass_s": 0.0,
                                                       "draft_pass_seq_s": 0.0, "draft_node_s": 0.0})
    # a row's pick and top-k off every per-row figure, each at its probe's vocabulary (the first
    # pass's on the context's shape, the later passes' on the hidden-64 model); fixed parts as they were
    first_row, later_row = 9e-6, 1e-6
    less = drafter_host_figures(t, first_row, later_row)
    assert less == pytest.approx(want | {"draft_seq_s": first_seq - first_row, "draft_pass_seq_s": later_seq - later_row,
                                         "draft_node_s": node - later_row}, rel=1e-9)
    assert drafter_host_figures(t, 1.0, 1.0)["draft_seq_s"] == 0.0 and drafter_host_figures(t, 0.0, 1.0)["draft_node_s"] == 0.0


def test_medusa_host_figures_are_lines_through_its_probes():
    """Medusa's fixed part and part per sequence from its chain's two batch sizes (less its heads'
    rows' picks), per sequence and further node from its tree beyond the chain; clamped at 0."""
    from validation.drafter_host import DRAFT_PASS_SEQS, MEDUSA_HEADS, MEDUSA_TREE, medusa_host_figures
    first, seq, node = 110e-6, 80e-6, 0.3e-6
    t = {f"dhost_medusa_b{b}": first + b * seq for b in DRAFT_PASS_SEQS}
    b = DRAFT_PASS_SEQS[1]
    t["dhost_medusa_tree"] = t[f"dhost_medusa_b{b}"] + b * (MEDUSA_TREE - MEDUSA_HEADS) * node
    want = {"medusa_first_s": first, "medusa_seq_s": seq, "medusa_node_s": node}
    assert medusa_host_figures(t) == pytest.approx(want, rel=1e-9)
    row = 10e-6
    assert medusa_host_figures(t, row) == pytest.approx(want | {"medusa_seq_s": seq - MEDUSA_HEADS * row}, rel=1e-9)
    assert medusa_host_figures(t, 1.0)["medusa_seq_s"] == 0.0
    assert medusa_host_figures({k: 1e-3 for k in t}) == pytest.approx({"medusa_first_s": 1e-3, "medusa_seq_s": 0.0,
                                                                      "medusa_node_s": 0.0})


def test_pass_clock_times_medusas_heads_as_its_pass():
    """Medusa's heads' call is what the probe takes out of its drafting: every decode step holds
    one (but the last, whose sequences have one token left), and host work beside it."""
    from validation.host_probes import _decode_steps
    cols = _decode_steps(2, "cpu", {"scheme": "medusa", "heads": 4, "lm_head": "shared", "tree": "chain"}, 8, passes=True)
    assert (cols["draft_pass_time"] < cols["draft_time"]).all() and (cols["draft_pass_time"][:-1] > 0).all()


def test_pass_clock_splits_the_drafters_passes_out_of_each_steps_drafting():
    """The engine's EAGLE drafter on the probe model: every decode step's drafting holds its
    passes (5 a step, a chain of 5) and host work beside them; a scheme without a drafter has none."""
    from validation.host_probes import _decode_steps
    cols = _decode_steps(2, "cpu", {"scheme": "eagle", "depth": 5}, 8, passes=True)
    assert len(cols["draft_pass_time"]) == len(cols["draft_time"]) > 0
    # (a step whose sequences have one token left drafts nothing: no pass)
    assert (cols["draft_pass_time"] < cols["draft_time"]).all() and cols["draft_pass_time"][0] > 0
    assert (cols["draft_pass_time"] > 0).sum() >= len(cols["draft_time"]) - 2
    plain = _decode_steps(2, "cpu", {"scheme": "none"}, 8, passes=True)
    assert (plain["draft_pass_time"] == 0).all()


def test_logit_time_is_the_slope_over_the_vocabulary():
    """Probe times built from a fixed cost (the tree walk) and a cost per logit element give that
    cost back; no growth reads 0."""
    from validation.host_probes import LOGIT_NODES, logit_probe, LOGIT_SEQS, logit_time, LOGIT_VOCABS
    per, fixed = 2.5e-9, 4e-4
    t = [fixed + per * LOGIT_SEQS * (LOGIT_NODES + 1) * v for v in LOGIT_VOCABS]
    assert logit_time(*t) == pytest.approx(per)
    assert logit_time(1e-3, 9e-4) == 0.0
    tokens, n, path = logit_probe("cpu", 64)()  # the engine's own verification runs on it
    assert tokens.shape[0] == LOGIT_SEQS and all(1 <= k <= LOGIT_NODES + 1 for k in n.tolist())


def model_of(fn):
    """The model a forward probe's call runs (from its closure)."""
    from engine.model import Model
    return fn.__closure__[[c.cell_contents.__class__ for c in fn.__closure__].index(Model)].cell_contents


def test_the_pass_overhead_probe_runs_its_passes_as_the_drafters_do():
    """pass_overhead_us is measured on a forward that skips the index checks, as every drafter's
    model does (index_check_us is the checked call's extra); the target checks."""
    from engine.drafting.heads import random_drafters
    from engine.model import Model
    from sim.models import ModelSpec
    from validation.host_probes import forward_probe

    assert model_of(forward_probe(1, "cpu", check=False)).ops is model_of(forward_probe(1, "cpu", check=False)).ops_unchecked
    checked = model_of(forward_probe(1, "cpu"))
    assert checked.ops is not checked.ops_unchecked
    spec = ModelSpec(name="t", layers=1, hidden=64, heads=4, kv_heads=2, head_dim=16, ffn=128, vocab=256,
                     bytes_per_weight=4, bytes_per_kv=4)
    target = Model.random(spec, seed=0)
    d = random_drafters(target, 1)
    for m in [d.draft, d.eagle.model, *(h.model for h in d.mtp)]:
        assert m.ops is m.ops_unchecked


def test_a_forward_probe_attends_over_the_context_it_is_given():
    """forward_probe's `ctx`: the sequence's keys, over as many 16-slot pages as they take (a
    chain to verify beyond them too), every one of them attended to: the step's lengths are the
    context and its new tokens, and the output moves with the context (the cache's unwritten
    slots hold zeros, which still take their share of the softmax)."""
    import torch

    from engine.model import StepBatch
    from validation.host_probes import forward_probe

    def step_of(fn) -> StepBatch:
        return next(c.cell_contents for c in fn.__closure__ if isinstance(c.cell_contents, StepBatch))

    out = {}
    for ctx, nodes in ((8, 0), (40, 0), (30, 2)):
        call = forward_probe(1, "cpu", nodes=nodes, ctx=ctx)
        assert step_of(call).kv_lens.tolist() == [ctx + 1 + nodes]
        hidden, _ = call()  # (1 + nodes, H)
        assert hidden.shape == (1 + nodes, model_of(call).spec.hidden) and torch.isfinite(hidden).all()
        out[ctx] = hidden
    assert not torch.allclose(out[8], out[40])


def test_the_forward_probes_run_the_engines_kernels_at_its_width(monkeypatch):
    """The host-time forwards build their model as the engine builds its own on the device: its
    kernel backend (kernels.default_backend) and width (engine.checkpoint.engine_dtype), with a KV
    cache and step batch to match. On an H200 the probes once ran the torch reference's attention
    in float32 while the engine ran Triton in bfloat16: a layer read 1.14 ms of host time, the
    engine's 0.78 ms. Here the engine's choice is swapped for float64 and a recorded backend."""
    import torch

    import engine.checkpoint as checkpoint
    import validation.host_probes as hp
    asked: list[str] = []
    monkeypatch.setattr(checkpoint, "engine_dtype", lambda device: torch.float64)
    monkeypatch.setattr(hp, "default_backend", lambda device: asked.append(device) or "torch")
    call = hp.forward_probe(2, "cpu", nodes=2)
    model = model_of(call)
    assert asked == ["cpu"] and model.backend == "torch"
    assert model.embed.dtype == torch.float64
    logits, _ = call()  # the KV cache matches the model's width, or the store would refuse it
    assert logits.dtype == torch.float64


def test_verify_host_figures_take_differences():
    """verify_host_figures: the chain call is the call price; the trees' difference per node; the
    small tree's call beyond its nodes and a chain call; packing per node over 4 x 62 nodes; the
    probes' own logits (2, 9, 63 rows of 64) come off first."""
    from validation.host_probes import verify_host_figures, VERIFY_SEQS, VERIFY_TREES, VERIFY_VOCAB
    small, large = VERIFY_TREES
    us = 1e-6
    t = {"vchain": 100 * us, f"vtree{small}": (100 + 50 + 2 * small) * us, f"vtree{large}": (100 + 50 + 2 * large) * us,
         "pack0": 80 * us, f"pack{large}": (80 + 1.5 * VERIFY_SEQS * large) * us}
    f = verify_host_figures(t, 0.0)
    assert f["verify_call_s"] == pytest.approx(100 * us) and f["tree_node_s"] == pytest.approx(2 * us)
    assert f["tree_call_s"] == pytest.approx(50 * us) and f["pack_node_s"] == pytest.approx(1.5 * us)
    logit = 1e-9  # the logits' share is taken off each call: the chain's 2 rows, the trees' rows
    g = verify_host_figures({k: v + logit * VERIFY_VOCAB * rows for k, v, rows in
                             ((k, v, {"vchain": 2, f"vtree{small}": small + 1, f"vtree{large}": large + 1}.get(k, 0))
                              for k, v in t.items())}, logit)
    assert all(g[k] == pytest.approx(f[k], rel=1e-9) for k in f)


def test_a_pass_priced_with_its_lm_head_is_its_measured_time():
    """pass_fixed_time takes the LM head's launches off a probe pass's fixed time, since the cost
    model adds them to every pass with an LM head: fixed part plus those launches is the time
    measured (the LM head's host time charged once); a launch price above it reads 0."""
    from sim.cost import KERNELS_PER_LAYER, LM_HEAD_KERNELS
    from validation.host_probes import pass_fixed_time
    layer_s = 800e-6
    launch_s = layer_s / KERNELS_PER_LAYER
    for measured in (300e-6, 526e-6):
        fixed = pass_fixed_time(measured, layer_s)
        assert fixed < measured
        assert fixed + LM_HEAD_KERNELS * launch_s == pytest.approx(measured, rel=1e-12)
    assert pass_fixed_time(0.5 * LM_HEAD_KERNELS * launch_s, layer_s) == 0.0


def test_layer_probes_time_the_family_layer_less_its_priced_products():
    """layer_probes: a forward of a model with the family's layers; layer_time takes the
    forwards' difference per layer less the cost model's price of the layer's products
    (layer_products_time: the larger of their compute on the curves and their weights'
    streaming), never negative."""
    from sim.cost import weight_shapes
    from validation.host_probes import layer_probes, layer_products_time, layer_time
    from validation.probes import EW_SPEC
    calls = layer_probes(2, "cpu")
    assert set(calls) == {"layer2"}
    hidden, logits = calls["layer2"]()
    assert hidden.shape == (1, EW_SPEC.hidden) and logits.shape == (1, EW_SPEC.vocab)
    attn, ffn, _ = weight_shapes(EW_SPEC, 1)
    params, peak = sum(k * n for k, n in attn + ffn), 100e9
    # one curve, 0.05 of the peak at one row: compute 2 x params / (0.05 peak); streaming far faster
    curve = {768: [[1, 0.05], [16, 0.5]]}
    assert layer_products_time(curve, peak, 1e15, 6) == pytest.approx(2 * params / (0.05 * peak), rel=1e-9)
    # streaming slower than that: the weights' bytes (fp32) and one row's activations over the rate
    assert 4 * params / 1e9 < layer_products_time(curve, peak, 1e9, 6) < 1.01 * 4 * params / 1e9
    # warm curves apply where the probe model's weights (6 layers) fit the cache, else the curve
    warm = {768: [[1, 0.1], [16, 0.5]]}
    from dataclasses import replace
    fits = replace(EW_SPEC, layers=6).weight_bytes
    assert layer_products_time(curve, peak, 1e15, 6, warm, fits) == pytest.approx(2 * params / (0.1 * peak), rel=1e-9)
    assert layer_products_time(curve, peak, 1e15, 6, warm, fits * 0.9) == pytest.approx(2 * params / (0.05 * peak), rel=1e-9)
    host, mm = 300e-6, 200e-6  # a layer's host time and its priced products
    t = {"layer1": 1e-3 + host + mm, "layer6": 1e-3 + 6 * (host + mm)}
    assert layer_time(t, 6, mm) == pytest.approx(host, rel=1e-9)
    assert layer_time(t, 6, 2 * (host + mm)) == 0.0


def test_last_level_cache_is_the_highest_level_sysfs_lists(tmp_path):
    """last_level_cache_bytes: the largest level among cpu0's data and unified caches, its size
    in K, M or G; 0 where there is none or it cannot be read."""
    from validation.probes import last_level_cache_bytes
    for i, (level, kind, size) in enumerate(((1, "Data", "48K"), (1, "Instruction", "32K"), (2, "Unified", "2048K"),
                                             (3, "Unified", "300M"), (4, "Instruction", "1G"))):
        d = tmp_path / f"index{i}"
        d.mkdir()
        for name, text in (("level", f"{level}\n"), ("type", f"{kind}\n"), ("size", f"{size}\n")):
            (d / name).write_text(text)
    assert last_level_cache_bytes(tmp_path) == 300 << 20
    (tmp_path / "index3" / "size").write_text("unknown\n")
    assert last_level_cache_bytes(tmp_path) == 2048 << 10
    assert last_level_cache_bytes(tmp_path / "absent") == 0


def test_elementwise_time_is_the_slope_between_two_sizes():
    """elementwise_ns: the extra time per extra element between EW_PAIR's two sizes, so each
    operation's fixed host time (charged per layer by launch_us) cancels; never negative."""
    from sim.cost import elementwise_elems
    from validation.probes import EW_PAIR, EW_SPEC, elementwise_time
    per_tok = elementwise_elems(EW_SPEC)[0]
    fixed, ns = 220e-6, 0.8e-9
    small, large = (fixed + n * per_tok * ns for n in EW_PAIR)
    assert elementwise_time(small, large) == pytest.approx(ns, rel=1e-9)
    assert elementwise_time(large, small) == 0.0


def test_elementwise_curve_averages_each_stretch_without_the_fixed_part():
    """elementwise_sizes: passes timed as a fixed part plus 0.8 ns an element up to 1,024 tokens
    and 1.2 ns beyond give 0.8 ns at the first three sizes and the running average at 4,096."""
    from sim.cost import elementwise_elems
    from validation.probes import EW_SPEC, EW_TOKENS, average_per_unit, elementwise_curve
    per_tok = elementwise_elems(EW_SPEC)[0]
    fixed, slow_from = 220e-6, 1024 * per_tok
    elems = [n * per_tok for n in EW_TOKENS]
    t = {f"ew{n}": fixed + min(e, slow_from) * 0.8e-9 + max(0.0, e - slow_from) * 1.2e-9 for n, e in zip(EW_TOKENS, elems)}
    curve = elementwise_curve(t)
    assert [m for m, _ in curve] == pytest.approx([e / 1e6 for e in elems], abs=1e-4)
    assert [x for _, x in curve] == pytest.approx([0.8, 0.8, 0.8, (0.8 * 1024 + 1.2 * 3072) / 4096], abs=1e-4)
    # a stretch that read faster than the one before it keeps its own (never negative) rate
    assert average_per_unit([1.0, 2.0, 4.0], [5.0, 7.0, 6.0]) == pytest.approx([2.0, 2.0, 1.0 + 0.5e-15])
    # and a profile still loads: every size at least the last place written, 1e-4 ns
    flat = elementwise_curve({f"ew{n}": fixed for n in EW_TOKENS})
    assert [x for _, x in flat] == [1e-4] * len(EW_TOKENS)


def test_the_lookup_probe_runs_between_the_passes_of_the_model_it_is_given(monkeypatch):
    """ngram_probe times prompt lookup in the engine's decode steps on random weights of the
    checkpoint's shape (the calibration's context model where it fits the cache, since 0.55.0),
    by default the 1-layer hidden-64 probe model, each step's mean drafting time by sequences."""
    import numpy as np

    import validation.host_probes as hp
    from sim.models import model_from_node
    seen = []

    def steps(batch, device, entry, tokens, traffic=None, prompt=16, passes=False, checkpoint=hp.TINY_CHECKPOINT):
        seen.append((batch, entry["scheme"], prompt, checkpoint))
        return {"draft_time": np.array([1e-5 * batch, 3e-5 * batch])}
    monkeypatch.setattr(hp, "_decode_steps", steps)
    family = hp.checkpoint_of(model_from_node(Node("tiny", None, "model"), Path(".")))
    assert hp.ngram_probe("cpu") == {f"ngram{b}": pytest.approx(2e-5 * b) for b in hp.NGRAM_SEQS}
    hp.ngram_probe("cpu", None, family)
    assert [s[3] for s in seen] == [hp.TINY_CHECKPOINT] * len(hp.NGRAM_SEQS) + [family] * len(hp.NGRAM_SEQS)
    assert {s[1:3] for s in seen} == {("ngram", hp.NGRAM_PROMPT)} and family["hidden"] == 256


def test_ngram_times_split_a_lookup_step_into_its_call_and_sequences():
    """ngram_call_us / ngram_seq_us: the probe's growth from 1 to 16 sequences per sequence, and
    the rest of the 1-sequence step's time; neither below 0."""
    from validation.host_probes import NGRAM_SEQS, ngram_times
    b0, b1 = NGRAM_SEQS
    call, seq = 40e-6, 15e-6
    t = {f"ngram{b0}": call + b0 * seq, f"ngram{b1}": call + b1 * seq}
    assert ngram_times(t) == pytest.approx((call, seq), rel=1e-9)
    assert ngram_times({f"ngram{b0}": 5e-5, f"ngram{b1}": 4e-5}) == (5e-5, 0.0)
    assert ngram_times({f"ngram{b0}": 1e-5, f"ngram{b1}": 1e-5 + (b1 - b0) * 2e-5}) == (0.0, pytest.approx(2e-5))


def test_draft_cand_time_per_extra_candidate():
    """draft_cand_us: the tree probe's extra time at top-8 over top-2 per extra candidate (4
    sequences of depth 6: 8 + 5 x 64 against 2 + 5 x 4 candidates each)."""
    from validation.host_probes import draft_cand_time, draft_tree_candidates, DRAFT_TREE_SEQS
    assert draft_tree_candidates(8, 6) == 328 and draft_tree_candidates(2, 6) == 22
    t2, t8 = 300e-6 + 2e-6 * DRAFT_TREE_SEQS * 22, 300e-6 + 2e-6 * DRAFT_TREE_SEQS * 328
    assert draft_cand_time(t2, t8) == pytest.approx(2e-6, rel=1e-9) and draft_cand_time(t8, t2) == 0.0


def test_a_resample_draws_each_probes_calls_and_keeps_a_pairs_calls_together():
    """`Calibration.resampled`: every figure keeps its number of calls, each drawn from its own
    calls with replacement, and the figures of a paired probe come from the same calls (their
    difference is what the profile keeps)."""
    import numpy as np

    from validation.calibrate import Calibration
    cal = object.__new__(Calibration)  # only the calls: no probes built
    cal.samples = {"copy": [1.0, 2.0, 3.0, 4.0], "forward1": [10.0, 20.0, 30.0, 40.0], "forward6": [11.0, 21.0, 31.0, 41.0]}
    cal.figure_names = {"copy": {"copy": None}, "forwards": {"forward1": None, "forward6": None}}
    rng = np.random.default_rng(0)
    drawn = set()
    for _ in range(50):
        r = cal.resampled(rng)
        assert set(r) == set(cal.samples) and {len(v) for v in r.values()} == {4}
        assert set(r["copy"]) <= {1.0, 2.0, 3.0, 4.0}
        assert [b - a for a, b in zip(r["forward1"], r["forward6"])] == [1.0] * 4  # one call's pair together
        drawn.add(tuple(r["copy"]))
    assert len(drawn) > 20  # with replacement, not the calls as they came
    assert cal.samples["copy"] == [1.0, 2.0, 3.0, 4.0]  # the calls themselves untouched


def test_a_probes_further_calls_spread_evenly_through_the_cycle():
    """`spaced`: the cycle keeps every probe and its order, and a probe called n times a cycle is
    called once every 1/n of it (to a position), wherever it stands."""
    from validation.calibrate import spaced
    for before, n, m in ((0, 6, 4), (10, 6, 4), (37, 3, 2), (5, 2, 1)):
        keys = [f"p{i}" for i in range(before)] + ["a", "b"] + [f"q{i}" for i in range(40 - before)]
        copies = {"a": [f"a{i}" for i in range(1, n)], "b": [f"b{i}" for i in range(1, m)]}
        order = spaced(keys + [c for v in copies.values() for c in v], copies)
        assert sorted(order) == sorted(keys + [c for v in copies.values() for c in v])
        assert [k for k in order if k in keys] == keys
        for key, calls in (("a", n), ("b", m)):
            at = sorted(i for i, k in enumerate(order) if k == key or k in copies[key])
            gaps = [b - a for a, b in zip(at, at[1:] + [at[0] + len(order)])]
            assert len(at) == calls and max(gaps) - min(gaps) <= 2, (key, at)


def test_probes_run_amid_their_context_and_the_profile_says_so(tmp_path):
    """With a context model the host-time probes' passes are followed by its traffic (the engine
    steps' and drafter passes' models wrapped, the paired forwards read between calls), its reads
    kept off their times, and the profile's header names it; without one, nothing is read."""
    from validation.calibrate import Calibration, context_model
    from validation.profile import write_profile
    cal = Calibration(size_mb=8, gemm_n=64, context=context_model("tiny"), reuse_calls={4: 2})
    for k in ("forwards", "engine", "draft_later", "verify_host"):
        cal.probes[k]()
    assert cal.traffic.swept > 0
    cal.complete()
    text = write_profile(cal.figures(), cal.size_mb)
    assert "amid the memory traffic of model tiny: 16.0 MiB read after a target pass, 7.0 MiB" in text
    assert f"\nop_us: {cal.figures()['launch_s'] * 1e6:.2f}\n" in text  # the one-element op (Medusa's ops)
    if cal.cache_bytes:  # the warm curves say how far apart their passes were timed
        from validation.calibrate import WARM_GAP_S
        assert f"weights in the last-level cache, passes {WARM_GAP_S * 1e3:g} ms apart" in text
    # the engine's products timed in place, where the context's weights fit the cache
    fits = cal.cache_bytes and context_model("tiny").weight_bytes <= cal.cache_bytes
    reuse = [k for k in cal._order if isinstance(k, tuple) and k[0] == "reuse"]
    assert cal.in_place == bool(fits) and sorted(reuse) == ([("reuse", 1, 0), ("reuse", 4, 0), ("reuse", 4, 1)] if fits else [])
    if fits:  # the copy at 4 rows is called each round and its calls pool with the first's
        assert cal.calls[("reuse", 4, 1)] == cal.calls[("reuse", 4, 0)] >= 1
        assert len(cal.samples["reusefirst4"]) == 2 * len(cal.samples["reusefirst1"])
    # a first pass's host work on the context's own shape where it fits (its picks over its vocabulary)
    assert cal.first_vocab == (context_model("tiny").vocab if fits else 256)
    if fits:
        got = cal.figures()
        reuse, step = got["gemm_reuse"], got["gemm_step"]
        assert [r[0] for r in reuse] == [1, 4] and all(0 < x < 10 for r in reuse for x in r[1:])
        assert [r[0] for r in step] == [1, 4] and all(0 < x < 10 for r in step for x in r[1:])
        assert all(f"\n{k}: " in text for k in ("gemm_reuse", "gemm_step")) and "gemm_verify" not in got
        path = tmp_path / "p.yaml"
        path.write_text(text)
        hw = hardware_from_node(Node(str(path), None, "hardware"), Path("."))
        assert hw.gemm_reuse == tuple(tuple(r) for r in reuse) and hw.gemm_step == tuple(tuple(r) for r in step)
        # the fused input's rest, timed in the EAGLE run's later passes (1 and 4 rows)
        assert hw.draft_input_s == pytest.approx(got["draft_input_s"], abs=1e-7)
        assert hw.draft_input_row_s == pytest.approx(got["draft_input_row_s"], abs=1e-9)
        assert 0 < got["draft_input_s"] + 4 * got["draft_input_row_s"] < 0.01
        # a later layer timed in place at 1 and 4 sequences; the host time a layer is the excess at 1
        lay = got["layer_rows"]
        assert [r[0] for r in lay] == [1, 4] and all(0 < r[2] < 0.1 and r[3] > 0 for r in lay)
        assert got["layer_s"] == max(0.0, lay[0][1]) and got["shape_layer_s"] >= 0
        assert "timed in its engine steps beyond its priced products and attention" in text
        # chains' attention in place beyond its price, a sequence's at 4 (the group calls), loaded
        assert sorted(got["verify_seqs"]) == [2, 6] and all([r for r, _ in c] == [4] for c in got["verify_seqs"].values())
        assert all(0 <= x < 1000 for c in got["verify_seqs"].values() for _, x in c) and "\nverify_seqs: " in text
        assert hw.verify_seqs == tuple((q, tuple((r, pytest.approx(x * 1e-6)) for r, x in c))
                                       for q, c in sorted(got["verify_seqs"].items()))
        # a speculative step's rest beyond a decode's, in place at 1 and 4 sequences, written and loaded
        assert [r for r, _ in got["spec_rows"]] == [1, 4] and "\nspec_step_us: " in text and "\nspec_seq_us: " in text
        assert hw.spec_step_s == pytest.approx(got["spec_step_s"], abs=1e-7)
        assert hw.spec_seq_s == pytest.approx(got["spec_seq_s"], abs=1e-8)
        assert hw.launch_s == pytest.approx(got["layer_s"] / KERNELS_PER_LAYER, abs=0.5e-8 * 1.001)
        # the price it is taken off: the cost model's for one of the context's layers without an LM
        # head, on this profile, its launches left out (whatever layer_s); more rows, more keys cost more
        from sim.cost import ForwardCost, Work
        from validation.reuse import layer_price
        spec = context_model("tiny")
        price = layer_price(got, spec)
        assert price(1, 150) == layer_price(got | {"layer_s": 1.0}, spec)(1, 150) > 0
        assert price(4, 150) > price(1, 150) and price(1, 4000) > price(1, 150)
        no_launch = hardware_from_node(Node(str(path), None, "hardware"), Path("."))
        no_launch = dataclasses.replace(no_launch, launch_s=0.0).for_weights(spec.weight_bytes)
        for layers in (1, None):
            want = ForwardCost(spec, no_launch, layers=layers, lm_head=False)(Work(4, 4, 600, 600, 0)).time
            assert price(4, 600) * (layers or spec.layers) == pytest.approx(want, rel=1e-3)
    plain = Calibration(size_mb=8, gemm_n=64)
    assert plain.traffic is None and plain.context is None and not plain.in_place and plain.first_vocab == 256
    # the context's own matrices get matmul curves of their own, cold and (where they fit) warm
    from sim.cost import model_shapes
    # where its weights fit the last-level cache (it is priced on the warm curves), warm only
    timed = cal.shapes_warm if cal.cache_bytes and context_model("tiny").weight_bytes <= cal.cache_bytes else cal.shapes
    assert {(k, n) for k, n, _ in timed} == model_shapes(context_model("tiny")) and not plain.shapes
    assert not (cal.shapes and cal.shapes_warm)


def test_shape_curves_are_measured_written_and_read_back(tmp_path):
    """Calibration(models=...) times `x @ W.T` for each (k, n) at the small form's rows where
    its model prices it: cold (gemm_shapes) for a model larger than the last-level cache, warm
    (gemm_shapes_warm) for one that fits it (where this host says how large its cache is); the
    profile writes them and a loaded profile prices a matrix of that shape on its curve."""
    from sim.cost import row_efficiency
    from validation.calibrate import Calibration
    cal = Calibration(size_mb=8, gemm_n=64, models=[(1 << 40, {(64, 96), (96, 64)}), (1 << 10, {(64, 96), (32, 32)})])
    cal.complete()
    m = cal.figures()
    assert sorted(m["gemm_shapes"]) == ["64x96", "96x64"] + ([] if cal.cache_bytes else ["32x32"])
    assert all([r for r, _ in c] == [1, 4, 16] and all(f > 0 for _, f in c) for c in m["gemm_shapes"].values())
    if cal.cache_bytes:
        assert sorted(m["gemm_shapes_warm"]) == ["32x32", "64x96"]
    path = tmp_path / "p.yaml"
    path.write_text(profile_yaml(m, "test CPU", 8, "test"))
    hw = hardware_from_node(Node(str(path), None, "hardware"), Path("."))
    assert [kn for kn, _ in hw.gemm_shapes] == [(64, 96), (96, 64)]
    for rows, frac in m["gemm_shapes"]["96x64"]:
        assert row_efficiency(hw, 96 * 64 * 4, rows, (96, 64)) == pytest.approx(frac, rel=1e-9)


def test_between_runs_before_every_timed_call():
    """interleaved_times and steady_time call `between` (a pass's traffic, a step's gap) before
    each timed call (not in interleaved_times' untimed round), outside the time they report."""
    from validation.timing import interleaved_times, steady_time
    log = []
    interleaved_times({"a": lambda: log.append("a"), "b": lambda: log.append("b")}, "cpu", 2,
                      between=lambda: log.append("-"))
    assert log == ["a", "b"] + ["-", "a", "-", "b"] * 2
    log.clear()
    interleaved_times({"a": lambda: log.append("a"), "b": lambda: log.append("b")}, "cpu", 1,
                      between={"b": lambda: log.append("+")})  # per call: none before a
    assert log == ["a", "b", "a", "+", "b"]
    log.clear()
    steady_time(lambda: log.append("x"), "cpu", least=3, most=3, between=lambda: log.append("-"))
    assert log == ["-", "x"] * 3


def test_a_bad_context_exits_2(tmp_path, capsys):
    assert main(["--out", str(tmp_path / "x.yaml"), "--context", "nosuch"]) == 2
    err = capsys.readouterr().err
    assert "--context" in err and "nosuch" in err and "Traceback" not in err


def test_cold_calls_touch_their_memory_before_the_sweep():
    """A cold probe call (the cold matmul curves, the KV gathers) runs once untimed, then the sweep
    that evicts the cache, then the timed call: on a VM a page left alone for seconds reads slower
    at its first touch, which the engine, touching its weights every step, never pays."""
    from validation.calibrate import cold_time
    log = []

    class Flush:
        def add_(self, x):
            log.append("sweep")

    t = cold_time(lambda: log.append("call"), Flush(), "cpu")
    assert log == ["call", "sweep", "call"] and t >= 0


def test_insitu_figures_divide_each_part_by_the_warm_curves_price():
    """Each part's median over the warm shape curves' price of the same products at its rows (2 k
    n r FLOPs at the curve's fraction of the peak, summed over a layer's matrices, or all the
    target's layers' for gemm_step's); a table without the times or curves it needs is left
    out."""
    from sim.cost import model_shapes
    from validation.calibrate import context_model
    from validation.reuse import insitu_figures, layer_shapes
    m, peak = context_model("tiny"), 1e11
    frac = {1: 0.05, 4: 0.2, 24: 0.5}
    curves = {f"{k}x{n}": [[r, f] for r, f in sorted(frac.items())] for k, n in model_shapes(m)}

    def price(shapes, r):
        return sum(2.0 * k * n * r / (frac[r] * peak) for k, n in shapes)
    lm, layer = price([(m.hidden, m.vocab)], 4), price(layer_shapes(m), 4)
    t = {"reusefirst4": 0.5 * lm, "reuselater_layer4": 0.8 * layer, "reuselater_lm4": 0.25 * lm}
    assert insitu_figures(t, m, curves, peak, (4,)) == {"gemm_reuse": [[4, 0.5, 0.8, 0.25]], "gemm_step": []}
    t |= {"reuselayers4": 1.1 * layer * m.layers, "reuselm4": 0.9 * lm}
    assert insitu_figures(t, m, curves, peak, (4,)) == {"gemm_reuse": [[4, 0.5, 0.8, 0.25]], "gemm_step": [[4, 1.1, 0.9]]}
    no_lm = {k: c for k, c in curves.items() if k != f"{m.hidden}x{m.vocab}"}
    assert insitu_figures(t, m, no_lm, peak, (4,)) == {"gemm_reuse": [], "gemm_step": []}
    assert len(layer_shapes(m)) == 4 and set(layer_shapes(m)) <= model_shapes(m)
    # a part timed faster at more rows (a slow spell at 1) is pooled: both rows take its mean time
    t1 = {"reuselayers1": 3.0 * price(layer_shapes(m), 1) * m.layers, "reuselm1": 0.9 * price([(m.hidden, m.vocab)], 1)}
    slow = t1["reuselayers1"] / price(layer_shapes(m), 4) / m.layers  # 4 rows timed as fast as 1
    t4 = {"reuselayers4": 0.5 * slow * layer * m.layers, "reuselm4": 0.9 * lm}
    step = insitu_figures(t1 | t4, m, curves, peak, (1, 4))["gemm_step"]
    times = [f * price(layer_shapes(m), r) * m.layers for r, f, _ in step]
    assert times[0] == pytest.approx(times[1], rel=1e-3) == pytest.approx(0.75 * t1["reuselayers1"], rel=1e-3)
    assert [r[2] for r in step] == [0.9, 0.9]  # the LM head's rose: left as timed


def test_rising_pools_each_falling_run_into_its_mean():
    """The nondecreasing fit: unchanged where already rising, each falling run its mean."""
    from validation.reuse import rising
    assert rising([1.0, 2.0, 2.0, 5.0]) == [1.0, 2.0, 2.0, 5.0]
    assert rising([3.0, 1.0]) == [2.0, 2.0]
    assert rising([1.0, 4.0, 2.0, 0.0, 5.0]) == [1.0, 2.0, 2.0, 2.0, 5.0]
    assert rising([]) == []


def test_the_fused_inputs_rest_is_a_line_through_its_rows():
    """input_line: the least-squares line through the fused input's rest by rows, a call's and a
    row's seconds, neither negative; insitu_figures gives it where two rows values or more were
    timed, and the profile writes it for the simulator to read back."""
    from validation.calibrate import context_model
    from validation.reuse import input_line, insitu_figures
    us = 1e-6
    assert input_line([(1, 80 * us), (4, 83 * us), (16, 95 * us), (64, 143 * us)]) == (
        pytest.approx(79 * us), pytest.approx(1 * us))
    assert input_line([(1, 90 * us), (64, 80 * us)]) == (pytest.approx(85 * us), 0.0)  # no negative slope
    m = context_model("tiny")
    t = {"reuseinput_rest1": 80 * us, "reuseinput_rest4": 83 * us}
    got = insitu_figures(t, m, {}, 1e11, (1, 4))
    assert got["draft_input_s"] == pytest.approx(79 * us) and got["draft_input_row_s"] == pytest.approx(1 * us)
    assert "draft_input_s" not in insitu_figures({"reuseinput_rest1": 80 * us}, m, {}, 1e11, (1, 4))


def test_the_probe_prompt_puts_its_timed_steps_at_the_traces_median_decode_context():
    """The probe's prompt: the requests' median of prompt + half the output, less the probe's
    untimed steps and half its timed ones, so its timed steps' middle sits at that context."""
    from sim.spec import load_trace
    from validation.reuse import REUSE_SKIP, REUSE_STEPS, probe_prompt
    root = Path(__file__).resolve().parents[1]
    # the family: 128-token prompts, 64 out -> decode steps' median context 160; timed from 147
    assert probe_prompt(load_trace(root / "traces" / "family-schemes.yaml")) == 160 - REUSE_SKIP - REUSE_STEPS // 2 == 147
    trace = load_trace(root / "traces" / "golden-tiny.yaml")
    from sim.workload import make_requests
    import statistics
    median = statistics.median(r.prompt_tokens + r.output_tokens // 2 for r in make_requests(trace.workload, trace.seed).requests)
    assert probe_prompt(trace) == max(1, int(median) - REUSE_SKIP - REUSE_STEPS // 2)


def test_insitu_probe_times_each_part_where_the_engine_runs_it():
    """ProductClock in an engine run (tiny shape, EAGLE chain of 5): every whole step has the
    chain's passes at one row a sequence, the target verifying six, a layer's four products in
    each pass and the target's layers' four each plus its LM head; step_parts keeps only whole
    steps (a step with a prefill or a shorter chain has other rows or passes)."""
    from engine.runner import run_scheme
    from validation.host_probes import TINY_CHECKPOINT, probe_engine
    from validation.reuse import INSITU_DEPTH, ProductClock, step_parts
    trace, target, drafters, requests = probe_engine(2, "cpu", {"scheme": "eagle", "depth": INSITU_DEPTH}, 12,
                                                     checkpoint=TINY_CHECKPOINT)
    import torch
    plain = torch.Tensor.__matmul__
    clock = ProductClock(target, drafters.eagle)
    with clock:
        run_scheme(trace, trace.speculation[0], requests, target, drafters=drafters)
    assert torch.Tensor.__matmul__ is plain  # restored on exit
    chains = [s for s in clock.steps if len(s["passes"]) == INSITU_DEPTH]
    # the first chain catches up on the prompt (16 rows a sequence; logits for the last only)
    assert [n for n, _ in chains[0]["passes"][0]["layer"]] == [32] * 4
    whole = chains[1:]
    assert len(whole) >= 3
    for s in whole:
        assert [n for n, _ in s["target"]["layer"]] == [12] * 4 * target.spec.layers
        assert [n for n, _ in s["target"]["lm"]] == [12]
        assert all([n for n, _ in p["layer"]] == [2] * 4 and [n for n, _ in p["lm"]] == [2] for p in s["passes"])
        # each pass's fused input, timed whole, holds its one 2h -> h product
        for p in s["passes"][1:]:
            assert [n for n, _ in p["input"]] == [2] and [n for n, _ in p["input_product"]] == [2]
            assert p["input"][0][1] > p["input_product"][0][1]
    got = step_parts(clock.steps, 2, INSITU_DEPTH, skip=1)
    assert set(got) == {"first", "later_layer", "later_lm", "input_rest"}
    # the catch-up chain counts too (its first pass's LM head runs one row a sequence)
    assert len(got["first"]) == len(chains) - 1 and all(x > 0 for v in got.values() for x in v)
    assert step_parts(clock.steps, 3, INSITU_DEPTH) == {}  # no step of 3 sequences
    # the target's prefill and the shorter chains at the end are other steps, left out
    assert len(clock.steps) > len(whole)


def test_the_insitu_probes_steps_carry_the_engines_log_and_their_rest(monkeypatch):
    """timed_steps joins ProductClock's steps (the warm-up forward dropped) with the engine's step
    log; a step's rest (its clock less drafting and the target's forward) holds its verification:
    with every chain's verification slowed by 3 ms, the EAGLE run's rest reads 3 ms more than the
    plain run's, and spec_rest_figures takes that (less nothing else priced: all figures 0)."""
    import statistics
    import time

    import engine.runner as runner
    from engine.runner import run_scheme
    from validation.calibrate import context_model
    from validation.host_probes import TINY_CHECKPOINT, probe_engine
    from validation.reuse import INSITU_DEPTH, ProductClock, spec_rest_figures, step_parts, timed_steps
    greedy = runner.verify_chain_greedy

    def slowed(rows, drafts):
        if drafts.shape[1]:  # a chain's, not a decode's
            end = time.perf_counter() + 0.003
            while time.perf_counter() < end:
                pass
        return greedy(rows, drafts)
    monkeypatch.setattr(runner, "verify_chain_greedy", slowed)
    t = {}
    for passes, entry in ((0, {"scheme": "none"}), (INSITU_DEPTH, {"scheme": "eagle", "depth": INSITU_DEPTH})):
        trace, target, drafters, requests = probe_engine(2, "cpu", entry, 12, checkpoint=TINY_CHECKPOINT)
        clock = ProductClock(target, drafters.eagle if passes else None)
        with clock:
            res = run_scheme(trace, trace.speculation[0], requests, target, drafters=drafters)
        cols = res.result.steps.columns()
        with pytest.raises(RuntimeError, match="target forwards"):
            timed_steps(clock.steps[1:], cols)
        steps = timed_steps(clock.steps, cols)
        assert len(steps) == len(cols["duration"]) and all(s["duration"] > s["forward"] + s["draft"] for s in steps)
        got = step_parts(steps, 2, passes, skip=1)
        rest, ops = ("chain_rest", "chain_ops") if passes else ("rest", "ops")
        assert got[rest] and all(0 < x < 0.05 for x in got[rest]) and all(x >= 0 for x in got[ops])
        t |= {f"reuse{rest}2": statistics.median(got[rest]), f"reuse{ops}2": statistics.median(got[ops])}
    zero = {"logit_s": 0.0, "pack_node_s": 0.0, "alloc_op_s": 0.0}
    excess = spec_rest_figures(t, zero, context_model("tiny"), (2,))["spec_rows"][0][1]
    assert 0.003 < excess < 0.0045


def test_a_speculative_steps_rest_is_priced_beyond_what_the_profile_already_charges():
    """spec_rest_figures: at each rows value r, the chain steps' rest less the decode steps',
    less the r x INSITU_DEPTH extra logit rows (logit_s x vocab each), drafted nodes packed
    (pack_node_s) and the allocator operations the chains add (alloc_op_s); the line through
    them (a step's part, a sequence's), neither negative; nothing where a rows value is missing
    a figure."""
    from validation.calibrate import context_model
    from validation.reuse import INSITU_DEPTH, spec_rest_figures
    m, us = context_model("tiny"), 1e-6
    fig = {"logit_s": 1e-9, "pack_node_s": 1 * us, "alloc_op_s": 2 * us}
    t = {}
    for r, excess in ((1, 100 * us), (4, 160 * us), (16, 400 * us)):
        nodes = r * INSITU_DEPTH
        priced = 1e-9 * m.vocab * nodes + 1 * us * nodes + 2 * us * 3 * r
        t |= {f"reuserest{r}": 300 * us, f"reuseops{r}": 0.5 * r,
              f"reusechain_rest{r}": 300 * us + excess + priced, f"reusechain_ops{r}": 3.5 * r}
    got = spec_rest_figures(t, fig, m, (1, 4, 16))
    assert [r for r, _ in got["spec_rows"]] == [1, 4, 16]
    assert [x for _, x in got["spec_rows"]] == pytest.approx([100 * us, 160 * us, 400 * us])
    assert got["spec_step_s"] == pytest.approx(80 * us) and got["spec_seq_s"] == pytest.approx(20 * us)
    assert spec_rest_figures(t, fig, m, (1, 64)) == {"spec_rows": [[1, pytest.approx(100 * us)]]}  # no line from one
    assert spec_rest_figures({k: v for k, v in t.items() if "chain" not in k}, fig, m) == {}


def test_the_insitu_probe_times_a_later_layer_whole_and_its_keys():
    """ProductClock marks a plain decoding run's later layers, from the second layer's first
    product to the LM head's: with every unchecked RMSNorm (two a later layer: the second
    layer's FFN norm, the later layers' both, the final norm) slowed by 4 ms, a layer reads 8 ms
    more than the same run's without (the quickest steps': the rest of a layer read 0.9-1.1 ms
    on the Zen 4 VM, and over 2 ms in a slow spell, which an absolute bound on the median, 9.8
    ms, failed); each
    step's keys are its sequences' kv_lens; step_parts keeps both. A 1-layer model has no later
    layer."""
    import time

    from engine.runner import run_scheme
    from validation.host_probes import TINY_CHECKPOINT, probe_engine
    from validation.reuse import ProductClock, step_parts

    def clocked(slowed: bool) -> list[dict]:
        """The clock's whole decode steps of a 3-layer model's run, its norms slowed or not."""
        trace, target, _, requests = probe_engine(2, "cpu", {"scheme": "none"}, 8, checkpoint=TINY_CHECKPOINT | {"layers": 3})
        norm = target.ops_unchecked.rms_norm

        def slow(*args, **kwargs):
            end = time.perf_counter() + 0.004
            while time.perf_counter() < end:  # busy: a sleep can overshoot by a millisecond
                pass
            return norm(*args, **kwargs)
        if slowed:
            target.ops_unchecked = dataclasses.replace(target.ops_unchecked, rms_norm=slow)
        clock = ProductClock(target)
        with clock:
            run_scheme(trace, trace.speculation[0], requests, target)
        return clock.steps
    base, steps = clocked(False), clocked(True)  # back to back: the host's speed about the same

    def decodes(steps):
        return [s for s in steps if [n for n, _ in s["target"]["lm"]] == [2] and s["keys"] > 2 * 16]
    decode, plain = decodes(steps), decodes(base)
    assert len(decode) >= 5 and len(plain) >= 5
    assert all(s["layer"] > 0.008 for s in decode)  # two slowed norms a layer, not fewer
    # the quickest step of each: a step the host stalls reads slower, never faster
    added = min(s["layer"] for s in decode) - min(s["layer"] for s in plain)
    assert 0.007 < added < 0.009  # two norms' 8 ms: not 1.5 of them, nor 2.5 (from the first layer's product)
    # 16-token prompts, then one more key a sequence a step
    assert [s["keys"] for s in decode] == list(range(decode[0]["keys"], decode[0]["keys"] + 2 * len(decode), 2))
    got = step_parts(steps, 2, 0, skip=1)
    assert got["inplace"] == [s["layer"] for s in decode[1:]] and got["keys"] == [s["keys"] for s in decode[1:]]
    trace, one, _, requests = probe_engine(1, "cpu", {"scheme": "none"}, 4, checkpoint=TINY_CHECKPOINT)
    clock = ProductClock(one)
    with clock:
        run_scheme(trace, trace.speculation[0], requests, one)
    assert all("layer" not in s for s in clock.steps) and "inplace" not in step_parts(clock.steps, 1, 0, skip=1)


def test_the_insitu_probe_times_the_later_layers_attention_calls():
    """ProductClock times the target's later layers' attention calls (model.ops_unchecked's
    paged_attention) in its forwards, a layer's mean: with every attention call slowed by 10 ms
    (the first layer's and the EAGLE head's too: either counted would add 5 ms) a whole step
    reads 10 ms and the call's own time (under 3 ms on the tiny shape), in plain
    decoding and verifying a chain of 1; step_parts keeps them (and a one-pass chain's first
    pass only)."""
    import time

    from engine.runner import run_scheme
    from validation.host_probes import TINY_CHECKPOINT, probe_engine
    from validation.reuse import ProductClock, step_parts

    def slowed(ops):
        attend = ops.paged_attention

        def slow(*args, **kwargs):
            end = time.perf_counter() + 0.01
            while time.perf_counter() < end:  # busy: a sleep can overshoot by a millisecond
                pass
            return attend(*args, **kwargs)
        return dataclasses.replace(ops, paged_attention=slow)

    for entry, passes in (({"scheme": "none"}, 0), ({"scheme": "eagle", "depth": 1}, 1)):
        trace, target, drafters, requests = probe_engine(2, "cpu", entry, 10, checkpoint=TINY_CHECKPOINT | {"layers": 3})
        target.ops, target.ops_unchecked = slowed(target.ops), slowed(target.ops_unchecked)
        if passes:
            head = drafters.eagle.model
            head.ops, head.ops_unchecked = slowed(head.ops), slowed(head.ops_unchecked)
        clock = ProductClock(target, drafters.eagle if passes else None)
        with clock:
            run_scheme(trace, trace.speculation[0], requests, target, drafters=drafters)
        got = step_parts(clock.steps, 2, passes, skip=1)
        times = got["verify_attention" if passes else "attention"]
        # every call slowed; the quickest without a further 5 ms (a step the host stalls reads slower)
        assert len(times) >= 4 and all(x > 0.01 for x in times) and min(times) < 0.013
        keys = got["verify_keys" if passes else "keys"]
        assert keys == sorted(keys) and keys[0] > 2 * 16
        assert set(got) == ({"first", "verify_attention", "verify_keys"} if passes
                            else {"layers", "lm", "inplace", "keys", "attention"})


def test_verify_seq_table_is_a_sequences_share_of_the_chains_excess():
    """verify_seq_table: at each rows value of two sequences or more, the chain's attention less
    its price, less decoding's less its price, over the sequences, in us (never negative); one
    sequence (a call of its own) and missing runs left out."""
    from validation.reuse import verify_seq_table

    def price(seqs, q, keys):
        return 1e-5 * seqs * q + 1e-7 * keys
    t = {"reuseattention4": 5e-4, "reusekeys4": 600, "verify2attention4": 9e-4, "verify2keys4": 604,
         "verify6attention4": 5e-4, "verify6keys4": 620,  # under its price: 0
         "reuseattention1": 1e-4, "reusekeys1": 150, "verify6attention1": 9e-4, "verify6keys1": 155,
         "reuseattention16": 1e-3, "reusekeys16": 2400, "verify6attention16": 3e-3, "verify6keys16": 2480}
    plain4 = 5e-4 - price(4, 1, 600)
    got = verify_seq_table(t, price, (1, 4, 16))["verify_seqs"]
    assert got[2] == [[4, pytest.approx(((9e-4 - price(4, 2, 604)) - plain4) / 4 * 1e6, abs=0.01)]]
    assert got[6] == [[4, 0.0], [16, pytest.approx(((3e-3 - price(16, 6, 2480)) - (1e-3 - price(16, 1, 2400))) / 16 * 1e6,
                                                   abs=0.01)]]
    assert verify_seq_table({k: v for k, v in t.items() if k.startswith("reuse")}, price) == {}


def test_the_layer_in_place_is_its_time_beyond_its_price():
    """layer_in_place: each rows value's timed layer less the price at its rows and keys; the
    host time a layer is the excess at one sequence, never negative; none without the probe's
    times or at one sequence."""
    from validation.reuse import layer_in_place

    def price(rows, keys):
        return 1e-4 * rows + 1e-7 * keys
    t = {"reuseinplace1": 8e-4, "reusekeys1": 150, "reuseinplace4": 9e-4, "reusekeys4": 600}
    got = layer_in_place(t, price, (1, 4, 16))
    assert got["layer_rows"] == [[1, pytest.approx(8e-4 - 1e-4 - 1.5e-5), 8e-4, 150],
                                 [4, pytest.approx(9e-4 - 4e-4 - 6e-5), 9e-4, 600]]
    assert got["layer_s"] == pytest.approx(6.85e-4)
    assert layer_in_place({"reuseinplace1": 1e-5, "reusekeys1": 150}, price)["layer_s"] == 0.0
    assert layer_in_place({k: v for k, v in t.items() if k.endswith("4")}, price) == {
        "layer_rows": [[4, pytest.approx(4.4e-4), 9e-4, 600]]}
    assert layer_in_place({}, price) == {}


@pytest.mark.parametrize("geometry", [(2, 2, 64), (8, 4, 64), (1, 2, 128)])
def test_decode_probes_read_the_gather_curves_bytes_and_take_the_products_off(geometry):
    """A geometry's decode probes gather the gather curve's bytes (KV_SIZES); its curve reads
    each size's rate with the call's fixed part and the products (as priced) taken off: calls
    of a fixed part, products and bytes at 2 ns each give 1 / (2 ns x streaming rate)."""
    from validation.probes import decode_curve, decode_key, decode_sizes, kv_gather_bytes, KV_SIZES
    kv, _, d = geometry
    sizes = decode_sizes(geometry)
    assert [2 * s * c * kv * d * 4 for s, c in sizes] == [kv_gather_bytes(*size) for size in KV_SIZES]

    def products(seqs, keys):
        return 3e-6 * seqs * keys  # more than the bytes: left in, the rates would read 2.5x slower

    t = {decode_key("dec", geometry, s, c): 4e-4 + products(s, c) + 2e-9 * 2 * s * c * kv * d * 4 for s, c in sizes}
    curve = decode_curve(t, geometry, 1e11, products)
    assert [mib for mib, _ in curve] == [0.5, 2, 8, 32, 128]
    assert [e for _, e in curve] == pytest.approx([5.0e-3] * 5, abs=1e-4)
