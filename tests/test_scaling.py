"""validation/scaling.py (a scheme's decode step by batch, paired run by run) and the run order
that pairs it (sim.cli.run_levels' scheme_major)."""
from __future__ import annotations

import dataclasses
import math
from types import SimpleNamespace

import numpy as np
import pytest

from validation.scaling import batch_scaling, levels_of, usual_batch


def run(rows):
    """A RunResult stand-in from (duration, batch, prefill tokens[, drafting time]) rows."""
    rows = [r + (0.0,) * (4 - len(r)) for r in rows]
    d, b, p, dr = (np.array(col, dtype=float) for col in zip(*rows))
    cols = {"duration": d, "batch_size": b.astype(int), "prefill_tokens": p.astype(int), "draft_time": dr}
    return SimpleNamespace(steps=SimpleNamespace(columns=lambda: cols))


def test_ratios_are_paired_within_each_run_at_the_usual_batch():
    """Each run's median decode step at 4 (at its usual batch, prefill chunks and other batch
    sizes left out) over its own at 1; the engine's median over runs, the simulator's over draws."""
    fast = {"none-1": run([(0.010, 1, 0), (0.012, 1, 0), (0.500, 1, 128)]),
            "none-4": run([(0.015, 4, 0), (0.015, 4, 0), (0.011, 3, 0), (0.900, 4, 128)])}
    slow = {"none-1": run([(0.020, 1, 0)]), "none-4": run([(0.032, 4, 0)])}  # twice as slow, 1.6 not 1.5
    sim = [{"none-1": run([(0.010, 1, 0)]), "none-4": run([(0.014, 4, 0)])}]
    got = batch_scaling([fast, slow], sim)["none"]
    assert len(got) == 1
    row = got[0]
    assert (row["concurrency"], row["base"], row["batch"], row["base_batch"]) == (4, 1, 4, 1)
    assert row["engine_runs"] == pytest.approx([0.015 / 0.011, 0.032 / 0.020])
    assert row["engine"] == pytest.approx((0.015 / 0.011 + 1.6) / 2)
    assert row["sim"] == pytest.approx(1.4)
    assert row["error"] == pytest.approx(1.4 / row["engine"] - 1)
    logs = [math.log(0.015 / 0.011), math.log(1.6)]
    assert row["engine_se"] == pytest.approx(abs(logs[0] - logs[1]) / math.sqrt(2) / math.sqrt(2))
    assert "drafting" not in row  # plain decoding drafts nothing


def test_drafting_has_its_own_ratio():
    engine = [{"eagle-1": run([(0.020, 1, 0, 0.008)]), "eagle-4": run([(0.030, 4, 0, 0.012), (0.5, 4, 64, 0.2)])}]
    sim = [{"eagle-1": run([(0.020, 1, 0, 0.010)]), "eagle-4": run([(0.032, 4, 0, 0.013)])}]
    row = batch_scaling(engine, sim)["eagle"][0]
    assert row["engine"] == pytest.approx(1.5) and row["sim"] == pytest.approx(1.6)
    d = row["drafting"]
    assert d["engine"] == pytest.approx(1.5) and d["sim"] == pytest.approx(1.3)
    assert d["error"] == pytest.approx(1.3 / 1.5 - 1) and d["engine_se"] is None


def test_open_loop_and_single_level_schemes_have_no_scaling():
    runs = [{"none-open": run([(0.01, 2, 0)]), "eagle-1": run([(0.01, 1, 0)])}]
    assert levels_of(runs) == {"eagle": [1]}
    assert batch_scaling(runs, runs) == {}
    assert usual_batch(runs, "missing-4") is None


def test_a_level_the_simulator_never_reached_is_left_out():
    engine = [{"none-1": run([(0.01, 1, 0)]), "none-4": run([(0.02, 4, 0)]), "none-8": run([(0.03, 8, 0)])}]
    sim = [{"none-1": run([(0.01, 1, 0)]), "none-4": run([(0.02, 4, 0)]), "none-8": run([(0.03, 6, 0)])}]
    got = batch_scaling(engine, sim)["none"]
    assert [r["concurrency"] for r in got] == [4] and got[0]["engine_se"] is None


@pytest.mark.parametrize("scheme_major", [False, True])
def test_run_levels_order(scheme_major):
    """scheme_major runs each scheme's levels back to back; the report lists level by level either way."""
    from sim.cli import run_levels
    from sim.simulator import simulate
    from sim.spec import load_trace
    trace = load_trace("traces/engine-tiny.yaml")
    trace = dataclasses.replace(trace, workload=dataclasses.replace(trace.workload, requests=2))
    ran = []

    def execute(scheme, workload, tag, on_progress):
        ran.append(tag)
        return simulate(trace, scheme, workload)

    runs = run_levels(trace, [1, 2], execute, None, progress=False, scheme_major=scheme_major)
    labels = [s.label for s in trace.speculation]
    assert len(labels) >= 2
    level_major = [f"{label}-{c}" for c in (1, 2) for label in labels]
    assert ran == ([f"{label}-{c}" for label in labels for c in (1, 2)] if scheme_major else level_major)
    assert [f"{r['label']}-{r['concurrency']}" for r in runs] == level_major
