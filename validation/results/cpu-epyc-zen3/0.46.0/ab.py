"""Each request's own shrink against one for all, priced on the same engine runs: a comparison
made by 0.46.0's `compare` (acceptance shrunk request by request) beside `validation reprice
DIR --refit common` of it (0.45.0's one factor), entry by entry: the throughput, steps and TPOT
errors, and the steps of a run's slowest request (the median over the engine's runs, the
simulator's draws) with the spread of steps across requests.

    python ab.py DIR COMMON_DIR [DIR COMMON_DIR ...]
"""
import json
import statistics as st
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "0.45.0"))
from spread import steps as request_steps  # noqa: E402  each run's (or draw's) steps per request, by id


def slowest(runs: list[np.ndarray]) -> tuple[float, float]:
    """(median over runs of the slowest request's steps, of the sd of steps across requests)."""
    return float(np.median([x.max() for x in runs])), float(np.median([x.std() for x in runs]))


def show(own: Path, common: Path) -> None:
    a, b = (json.loads((d / "comparison.json").read_text())["runs"] for d in (own, common))
    by = {(r["label"], r["concurrency"]): r for r in b}
    print(f"== {own} (each request's factor) | {common} (one factor)")
    print(f"{'scheme':10} {'c':>2} | {'thr':>6} {'steps':>6} {'p50':>6} {'p99':>6} | {'thr':>6} {'steps':>6} {'p50':>6} "
          f"{'p99':>6} | slowest e / own / one   sd e / own / one")
    for r in a:
        key = (r["label"], r["concurrency"])
        if key not in by:
            continue
        e = request_steps(own, "engine/run", *key)
        s1, s2 = request_steps(own, "sim/draw", *key), request_steps(common, "sim/draw", *key)
        cols = []
        for x in (r, by[key]):
            err = x["errors"]
            cols.append(" ".join(f"{100 * err[k]:+6.1f}" for k in ("throughput_tok_s", "steps", "tpot_p50", "tpot_p99")))
        spread = ""
        if e and s1 and s2:
            (me, se), (m1, sd1), (m2, sd2) = slowest(e), slowest(s1), slowest(s2)
            spread = f"{me:5.1f} / {m1:5.1f} / {m2:5.1f}   {se:4.2f} / {sd1:4.2f} / {sd2:4.2f}"
        print(f"{key[0]:10} {key[1]:>2} | {cols[0]} | {cols[1]} | {spread}")
    for name, runs in (("own", a), ("one", b)):
        for c in sorted({r["concurrency"] for r in runs}):
            rs = [r for r in runs if r["concurrency"] == c]
            thr = [abs(r["errors"]["throughput_tok_s"]) for r in rs]
            p50 = [abs(r["errors"]["tpot_p50"]) for r in rs]
            p99 = [r["errors"]["tpot_p99"] for r in rs]
            print(f"  {name} c{c}: throughput median {100 * st.median(thr):.1f}%, within 5% {sum(x <= .05 for x in thr)} of "
                  f"{len(rs)}; TPOT p50 within 5% {sum(x <= .05 for x in p50)}; TPOT p99 above 10% "
                  f"{sum(abs(x) > .10 for x in p99)} (range {100 * min(p99):+.1f} .. {100 * max(p99):+.1f})")
    print()


if __name__ == "__main__":
    args = sys.argv[1:]
    for own, common in zip(args[::2], args[1::2]):
        show(Path(own), Path(common))
