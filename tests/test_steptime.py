"""validation.steptime: a point's samples and their standard error; each pass's calls run for a
minimum time (validation.probes.mean_time)."""
import pytest

from validation.timing import mean_time
from validation.steptime import measured


def test_a_point_is_the_mean_of_its_passes_with_its_standard_error():
    got = measured([0.02, 0.03])
    assert got["measured"] == pytest.approx(0.025)
    assert got["noise"] == pytest.approx(0.2)  # sd 0.00707 / mean 0.025 / sqrt(2)
    assert measured([0.02])["noise"] == 0.0


def test_calls_run_until_both_bounds_are_met(monkeypatch):
    """Calls run until there are `calls` of them and they add up to `min_s` seconds, after one
    warm-up call. Each call moves a fake clock 2 ms, so the count does not depend on how long this
    host takes to sleep (a loaded CI box once overslept 2 ms sleeps and stopped at 7 calls)."""
    import types

    import validation.timing as timing

    clock = [0.0]
    monkeypatch.setattr(timing, "time", types.SimpleNamespace(perf_counter=lambda: clock[0]))
    calls = []

    def call():
        calls.append(1)
        clock[0] += 0.002
    mean = mean_time(call, "cpu", 3, min_s=0.02)
    assert len(calls) - 1 == 10 and mean == pytest.approx(0.002)  # 10 calls make 20 ms
    calls.clear()
    assert mean_time(call, "cpu", 3, min_s=0.0) == pytest.approx(0.002)
    assert len(calls) - 1 == 3
    calls.clear()
    mean_time(call, "cpu", 3, min_s=0.001)  # the count bound is the larger
    assert len(calls) - 1 == 3


def test_a_mixed_point_prices_half_verifying_half_decoding_as_the_scheduler_would():
    """A mixed point's work, by hand: two of four sequences verify a 4-chain after 128 tokens of
    context (1 + 4 query tokens each: 128 + 1 + 4 x 129 + (1+2+3+4) = 655 pairs), two decode one
    token (129 pairs); only the verifying two take the fused path, and the pass is mixed."""
    from sim import trees as T
    from validation.steptime import work_of
    p = {"kind": "mixed4", "batch": 4, "context": 128, "q": 1, "tree": T.chain(4), "drafting": 2}
    w = work_of(p)
    assert (w.tokens, w.seqs, w.pairs, w.kv_read, w.lm_tokens) == (12, 4, 2 * 655 + 2 * 129, 4 * 129, 12)
    assert (w.mixed, w.multi_tokens, w.multi_kv, w.multi_seqs) == (1, 10, 2 * 133, 2)
    uniform = work_of({**p, "kind": "chain4", "drafting": 4})
    assert (uniform.pairs, uniform.mixed, uniform.multi_tokens) == (4 * 655, 0, 20)
    old = {k: v for k, v in p.items() if k != "drafting"}  # a point from a grid before 0.47.0
    assert work_of(old) == uniform


def test_the_grid_has_mixed_points_and_each_runs_in_the_engine_with_its_priced_tokens():
    from engine.model import Model
    from validation.calibrate import context_model
    from validation.steptime import grid, point_call, work_of
    for quick in (True, False):
        mixed = [p for p in grid(quick) if p["kind"].startswith("mixed")]
        assert mixed and all(0 < p["drafting"] < p["batch"] and work_of(p).mixed == 1 for p in mixed)
        assert all(work_of(p).mixed == 0 for p in grid(quick) if not p["kind"].startswith("mixed"))
    spec = context_model("tiny")
    model = Model.random(spec, seed=0)
    p = next(p for p in grid(True) if p["kind"].startswith("mixed"))
    hidden, logits = point_call(model, p, "cpu")()
    w = work_of(p)
    assert hidden.shape[0] == w.tokens and logits.shape[0] == w.lm_tokens


def test_fit_scales_flat_and_keyed_curves_alike():
    """`scaled` (steptime --fit's step on a figure's measured curves) multiplies every value of a
    size curve, or of each curve of a table by key (kv_decode), and caps them."""
    from validation.steptime import scaled
    flat = ((1.0, 0.2), (8.0, 0.6))
    assert scaled(flat, 2.0, 1.0) == ((1.0, 0.4), (8.0, 1.0))
    keyed = (((2, 2, 64), flat), ((8, 4, 64), ((4.0, 0.1),)))
    assert scaled(keyed, 0.5, 1.0) == (((2, 2, 64), ((1.0, 0.1), (8.0, 0.3))), ((8, 4, 64), ((4.0, 0.05),)))
    assert scaled((), 3.0, 1.0) == ()


def test_reprice_prices_a_grids_points_under_each_change_of_its_profile(tmp_path):
    """validation.steptime.reprice: each point at predict's price under the grid's measured
    profile as run, and with fields replaced; by_model splits the errors by model beside all;
    reprice_groups gives each way's line and the grouped points' errors."""
    import json
    import shutil
    from dataclasses import replace
    from sim.hardware import hardware_from_node
    from sim.specio import Node
    from validation.steptime import ROOT, by_model, grid_specs, predict, reprice, reprice_groups, summary_text
    shutil.copy(ROOT / "traces" / "hardware" / "cpu-measured.yaml", tmp_path / "measured-hardware.yaml")
    (name, _, spec), (other, _, _) = grid_specs("cpu", 4.0)
    pts = [{"kind": "chain3", "batch": 4, "context": 512, "q": 1, "tree": [-1, 0, 1], "drafting": 4, "model": name,
            "measured": 0.05},
           {"kind": "decode", "batch": 1, "context": 128, "q": 1, "tree": [], "drafting": 0, "model": other,
            "measured": 0.01}]
    (tmp_path / "steptime.json").write_text(json.dumps({"points": pts}))
    points, priced = reprice(tmp_path, {"as run": {}, "slow": {"fused_key_s": 1e-6}})
    hw = hardware_from_node(Node(str(tmp_path / "measured-hardware.yaml"), "t", "hardware"), ROOT)
    assert priced["as run"][0] == predict(spec, hw, {**pts[0], "tree": (-1, 0, 1)})
    assert priced["slow"][0] == predict(spec, replace(hw, fused_key_s=1e-6), {**pts[0], "tree": (-1, 0, 1)})
    assert priced["slow"][0] > priced["as run"][0] and priced["slow"][1] == priced["as run"][1]  # a decode: no fused part
    errs = by_model(points, priced["as run"])
    assert list(errs) == ["all", name, other] and errs[name] == [priced["as run"][0] / 0.05 - 1]
    assert summary_text([0.1, -0.2, 0.3]) == "20.0% / 30.0% (+10.0%)"
    lines, groups = reprice_groups(tmp_path, {"as run": {}, "slow": {"fused_key_s": 1e-6}},
                                   lambda p: p["kind"] if p["kind"] != "decode" else None)
    assert lines[0] == f"{tmp_path.name} {'as run':18}: " + "; ".join(
        f"{k} {summary_text(v)}" for k, v in errs.items())
    assert groups == {"chain3": {w: [priced[w][0] / 0.05 - 1] for w in ("as run", "slow")}}
