"""validation.calibrate in its small CPU form: every probe measures something and the profile it
writes loads as a hardware spec whose figures are the measured ones."""
from pathlib import Path

import pytest

from sim.hardware import hardware_from_node
from sim.specio import Node
from validation.calibrate import main, measure, profile_yaml

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_small_calibration_writes_a_loadable_profile(tmp_path):
    m = measure(size_mb=16, gemm_n=128, repeats=2)
    for key in ("copy_bw", "stream_bw", "flops_fp32", "launch_s", "layer_s", "step_s", "seq_s", "alloc_op_s",
                "multi_query_s", "draft_seq_s", "pass_s", "index_check_s", "mixed_query_s", "batch_query_s"):
        assert m[key] >= 0, key
    assert m["rounds"] == 2
    assert 0 < m["eta_attn"] <= 1 and m["attn_dense"] is True and 1e-11 < m["elementwise_s"] < 1e-7
    # matmul curves at the small form's two sizes (32, 128 KiB) and rows 1, 4, 16: positive rates
    assert sorted(m["gemm_rows"]) == [32, 128]
    assert all([r for r, _ in c] == [1, 4, 16] and all(f > 0 for _, f in c) for c in m["gemm_rows"].values())
    assert 1e8 < m["copy_bw"] < 1e12 and 1e8 < m["flops_fp32"] < 1e13
    path = tmp_path / "cpu-measured.yaml"
    path.write_text(profile_yaml(m, "test CPU", 8, "test"))
    hw = hardware_from_node(Node(str(path), None, "hardware"), Path("."))
    assert hw.peak("fp32") == pytest.approx(m["flops_fp32"], rel=1e-3)
    assert hw.mem_bw * hw.eta_memory == pytest.approx(m["stream_bw"], rel=1e-3)
    assert hw.step_overhead_s == pytest.approx(m["step_s"], rel=1e-2, abs=1e-7)
    assert hw.draft_seq_s == pytest.approx(m["draft_seq_s"], rel=1e-2, abs=1e-7)
    assert hw.pass_overhead_s == pytest.approx(m["pass_s"], rel=1e-2, abs=1e-7)
    assert hw.index_check_s == pytest.approx(m["index_check_s"], rel=1e-2, abs=1e-7)
    assert hw.mixed_query_s == pytest.approx(m["mixed_query_s"], rel=1e-2, abs=1e-7)
    assert hw.eta_attn == pytest.approx(m["eta_attn"], abs=1e-4) and hw.attn_dense
    assert hw.elementwise_s == pytest.approx(m["elementwise_s"], rel=1e-3)
    assert 1e-12 < m["logit_s"] < 1e-7 and hw.logit_s == pytest.approx(m["logit_s"], rel=1e-3)
    assert [b for b, _ in hw.gemm_rows] == [32 * 1024, 128 * 1024]
    assert hw.gemm_rows[0][1] == tuple((r, f) for r, f in m["gemm_rows"][32])


def test_cli_writes_where_asked(tmp_path, capsys):
    out = tmp_path / "x.yaml"
    assert main(["--out", str(out), "--size-mb", "8", "--gemm", "64", "--repeats", "1"]) == 0
    assert out.read_text().startswith("# Measured by")


def test_ticks_run_the_cycle_a_few_probes_at_a_time():
    """`tick` runs the next probes of the round-robin cycle (what runs between the measurements a
    profile predicts), `complete` finishes the cycle so every probe has as many calls."""
    from validation.calibrate import Calibration
    cal = Calibration(size_mb=8, gemm_n=64)
    order = list(cal.probes)
    cal.tick(3)
    assert [cal.calls[k] for k in order] == [1, 1, 1] + [0] * (len(order) - 3)
    assert set(cal.samples) == set(order[:3])  # single figures so far
    cal.complete()
    assert set(cal.calls.values()) == {1} and {len(v) for v in cal.samples.values()} == {1}
    cal.complete()  # a finished cycle stays as it is
    assert set(cal.calls.values()) == {1}
    cal.tick(len(order) + 2)  # wraps round: a second call of every probe, a third of the first two
    assert [cal.calls[k] for k in order[:3]] == [3, 3, 2]
    cal.complete()
    assert {len(v) for v in cal.samples.values()} == {3}
    assert cal.figures()["rounds"] == 3
    # paired probes give every figure of the pair from one call
    assert {"forward1", "forward6", "verifies6", "engine16", "mtp1", "logits1024", "attn64"} <= set(cal.samples)


def test_interleaved_times_alternate_the_calls():
    from validation.probes import interleaved_times
    log = []
    got = interleaved_times({"a": lambda: log.append("a"), "b": lambda: log.append("b")}, "cpu", 3)
    assert log == ["a", "b"] * 3 and set(got) == {"a", "b"} and all(t >= 0 for t in got.values())


def test_attention_efficiency_recovers_the_rate_it_was_built_from():
    """Probe times built from a known products rate over each sequence's queries x gathered keys,
    a gather rate and a fixed cost (which the difference cancels) give that rate back."""
    from validation.probes import (ATTN_CONTEXT, ATTN_FEW, ATTN_HEADS, ATTN_MANY, ATTN_SEQS, KV_DIM, KV_HEADS,
                                   attention_efficiency)
    peak, gather, eta, fixed = 100e9, 2e9, 0.3, 1e-3

    def t(n):
        keys = ATTN_SEQS * (ATTN_CONTEXT + n)
        return fixed + keys * 2 * (KV_HEADS // 4) * KV_DIM * 4 / gather \
            + 4 * ATTN_HEADS * KV_DIM * ATTN_SEQS * n * (ATTN_CONTEXT + n) / (eta * peak)
    assert attention_efficiency(t(ATTN_FEW), t(ATTN_MANY), gather, peak) == pytest.approx(eta)
    # the extra time no more than the extra reads: products are not what limits it
    assert attention_efficiency(1e-3, 1e-3, gather, peak) == 1.0


def test_logit_time_is_the_slope_over_the_vocabulary():
    """Probe times built from a fixed cost (the tree walk) and a cost per logit element give that
    cost back; no growth reads 0."""
    from validation.probes import LOGIT_NODES, LOGIT_SEQS, LOGIT_VOCABS, logit_probe, logit_time
    per, fixed = 2.5e-9, 4e-4
    t = [fixed + per * LOGIT_SEQS * (LOGIT_NODES + 1) * v for v in LOGIT_VOCABS]
    assert logit_time(*t) == pytest.approx(per)
    assert logit_time(1e-3, 9e-4) == 0.0
    tokens, n, path = logit_probe("cpu", 64)()  # the engine's own verification runs on it
    assert tokens.shape[0] == LOGIT_SEQS and all(1 <= k <= LOGIT_NODES + 1 for k in n.tolist())


def test_the_pass_overhead_probe_runs_its_passes_as_the_drafters_do():
    """pass_overhead_us is measured on a forward that skips the index checks, as every drafter's
    model does (index_check_us is the checked call's extra); the target checks."""
    from engine.drafting.heads import random_drafters
    from engine.model import Model
    from sim.models import ModelSpec
    from validation.probes import forward_probe

    def model_of(fn):
        return fn.__closure__[[c.cell_contents.__class__ for c in fn.__closure__].index(Model)].cell_contents

    assert model_of(forward_probe(1, "cpu", check=False)).ops is model_of(forward_probe(1, "cpu", check=False)).ops_unchecked
    checked = model_of(forward_probe(1, "cpu"))
    assert checked.ops is not checked.ops_unchecked
    spec = ModelSpec(name="t", layers=1, hidden=64, heads=4, kv_heads=2, head_dim=16, ffn=128, vocab=256,
                     bytes_per_weight=4, bytes_per_kv=4)
    target = Model.random(spec, seed=0)
    d = random_drafters(target, 1)
    for m in [d.draft, d.eagle.model, *(h.model for h in d.mtp)]:
        assert m.ops is m.ops_unchecked
