"""Whether the host-speed reference reads the host's speed (2026-12-05, 0.38.0).

Run from the repository root with the project's environment, one at a time (2 cores):

  python validation/results/cpu-epyc-zen3/0.38.0/references.py contexts ROUNDS
      every scheme of traces/family-schemes.yaml, a 4-request engine run at concurrency 4, then
      each candidate reference timed back to back for 0.4 s (median call) in three places: right
      after the engine's run, right after four of the calibration's probe calls
      (validation.calibrate, as compare runs them between engine runs), and after 0.5 s of sleep.
      ROUNDS rounds; per candidate the medians and the ratios of the places, run by run.
  python .../references.py follow SECONDS
      `none` and `draft` at concurrency 1, each 4-request run between two readings of every
      candidate: how well each follows the engine's median step over the host's spells
      (correlation of logs, the residual's standard deviation after a fit).

Candidates: `interp-0.37`, the loop validation.timing.host_reference was until 0.37.0 (a sum over
range(5000), one int object made a step); `smallint`, a loop over ints below 256 (CPython keeps
one object of each, so it makes none); `fwd1`, the calibration's one-layer host-time forward
(validation.host_probes.forward_probe); `ops`, 50 small torch calls; `now`, host_reference as
this checkout defines it.
"""
from __future__ import annotations

import statistics as st
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "0.35.0"))
from host_regimes import family, follow_references, run_at  # noqa: E402


def interp_037(iters: int = 5_000) -> int:
    s = 0
    for i in range(iters):
        s += i
    return s


def smallint(rounds: int = 50) -> None:
    r = 0
    while r < rounds:
        x = 0
        while x < 200:
            x += 1
        r += 1


def candidates() -> dict:
    from validation.host_probes import forward_probe
    from validation.timing import host_reference
    t = torch.ones(8)

    def ops():
        for _ in range(50):
            t.add(1.0)
    return {"interp-0.37": interp_037, "smallint": smallint, "fwd1": forward_probe(1, "cpu"), "ops": ops,
            "now": host_reference}


def rate(fn, secs: float = 0.4) -> float:
    """Calls a second: the median of back-to-back calls over `secs`, after one untimed."""
    times = []
    fn()
    end = time.perf_counter() + secs
    while time.perf_counter() < end:
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1 / st.median(times)


def contexts(rounds: int) -> None:
    from validation.calibrate import for_trace
    trace, model, drafters, prompts = family()
    cal = for_trace(trace, trace.model)
    refs = candidates()
    rows: dict = {}
    t0 = time.time()
    for _ in range(rounds):
        for scheme in trace.speculation:
            for name, fn in refs.items():
                run_at(trace, scheme, 4, model, drafters, prompts)
                rows.setdefault(("engine", name), []).append(rate(fn))
                cal.tick(4)
                rows.setdefault(("probes", name), []).append(rate(fn))
                time.sleep(0.5)
                rows.setdefault(("sleep", name), []).append(rate(fn))
    print(f"{rounds} rounds of {len(trace.speculation)} schemes at concurrency 4, {time.time() - t0:.0f} s; "
          "calls a second, median over the runs")
    print(f"{'':12}" + "".join(f"{p:>10}" for p in ("engine", "probes", "sleep")) + "   probes/engine (range)     sleep/engine")
    for name in refs:
        e, p, s = (rows[(c, name)] for c in ("engine", "probes", "sleep"))
        rp = sorted(b / a for a, b in zip(e, p))
        rs = sorted(b / a for a, b in zip(e, s))
        print(f"{name:12}" + "".join(f"{st.median(x):10.0f}" for x in (e, p, s))
              + f"   {st.median(rp):.3f} ({rp[0]:.3f}-{rp[-1]:.3f})   {st.median(rs):.3f}")


def follow(seconds: float) -> None:
    refs = candidates()
    follow_references(family(["none", "draft"]), lambda: {k: 1 / rate(fn, 0.05) for k, fn in refs.items()}, seconds)


if __name__ == "__main__":
    torch.set_num_threads(1)
    {"contexts": lambda: contexts(int(sys.argv[2])), "follow": lambda: follow(float(sys.argv[2]))}[sys.argv[1]]()
