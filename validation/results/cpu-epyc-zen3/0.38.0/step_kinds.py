"""A comparison's drafting time by kind of step, engine against simulator (2026-12-05, 0.38.0).

  python validation/results/cpu-epyc-zen3/0.38.0/step_kinds.py DIR [LABEL,...] [CONCS]

DIR: a `python -m validation compare` output with its step files (DIR/engine/run*/runs/ and
DIR/sim/draw*/runs/, LABEL-CONC-steps.csv; the committed comparisons keep only the reports).
Per label (default mtp1,mtp2) and concurrency (default 1,4), each side's drafting a step over
all its runs or draws: the steps with a prompt's prefill or right after one (where a drafter
catches up on the prompt), and the others, by mean and median; the mean over all steps is what
compare's `draft_time` reads, the median of the others what mtp_drafting.py reads.
"""
from __future__ import annotations

import csv
import statistics as st
import sys
from pathlib import Path

import numpy as np


def kinds(files) -> tuple[list[float], list[float]]:
    """(drafting seconds of steps at or right after a prefill, of the others) over `files`, each
    run's first step left out (validation.draft_kinds.step_kinds: the rule compare uses since
    0.39.0)."""
    from validation.draft_kinds import step_kinds
    after, other = [], []
    for f in files:
        rows = list(csv.DictReader(open(f)))
        admitted = step_kinds(np.array([int(r["prefill_tokens"]) for r in rows]))
        for r, adm in zip(rows[1:], admitted[1:]):
            (after if adm else other).append(float(r["draft_time"]))
    return after, other


def main(root: Path, labels: list[str], concs: list[int]) -> None:
    print(f"{root}: ms of drafting a step; at/after prefill: mean (steps); others: mean, median (steps)")
    for lab in labels:
        for c in concs:
            got = {}
            for side, sub in (("engine", "engine/run*/runs"), ("sim", "sim/draw*/runs")):
                a, o = kinds(sorted(root.glob(f"{sub}/{lab}-{c}-steps.csv")))
                got[side] = (st.mean(a), st.mean(o), st.median(o))
                print(f"  {lab}@{c} {side:6} at/after prefill {st.mean(a) * 1e3:6.2f} ({len(a)}); "
                      f"others {st.mean(o) * 1e3:5.2f}, {st.median(o) * 1e3:5.2f} ({len(o)})")
            e, s = got["engine"], got["sim"]
            print(f"  {lab}@{c} sim/engine: at/after prefill {s[0] / e[0]:.3f}; others' mean {s[1] / e[1]:.3f}, "
                  f"median {s[2] / e[2]:.3f}")


if __name__ == "__main__":
    main(Path(sys.argv[1]), (sys.argv[2] if len(sys.argv) > 2 else "mtp1,mtp2").split(","),
         [int(x) for x in (sys.argv[3] if len(sys.argv) > 3 else "1,4").split(",")])
