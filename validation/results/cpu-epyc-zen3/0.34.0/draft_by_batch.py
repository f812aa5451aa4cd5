"""A comparison's steps by batch size: the engine's drafting time a step and the rest of it
(median over its pooled runs' decode steps) against the simulator's (every draw), with the
per-sequence slope of drafting from batch 1 (the concurrency-1 run) to the largest batch.

    python validation/results/cpu-epyc-zen3/0.34.0/draft_by_batch.py COMPARE_DIR

COMPARE_DIR: the --out of `python -m validation compare` (its engine/run*/runs and
sim/draw*/runs step files)."""
import csv
import glob
import statistics as st
import sys


def steps(pattern: str) -> list[dict]:
    rows = []
    for f in sorted(glob.glob(pattern)):
        with open(f) as fh:
            rows += [r for r in csv.DictReader(fh) if int(r["prefill_tokens"]) == 0]
    return rows


def medians(rows: list[dict], b: int) -> tuple[float, float, int]:
    sel = [r for r in rows if int(r["batch_size"]) == b]
    if not sel:
        return float("nan"), float("nan"), 0
    return (st.median(float(r["draft_time"]) for r in sel),
            st.median(float(r["duration"]) - float(r["draft_time"]) for r in sel), len(sel))


def main(out: str) -> None:
    labels = sorted({f.split("/")[-1].rsplit("-", 2)[0] for f in glob.glob(f"{out}/engine/run1/runs/*-steps.csv")})
    concs = sorted({int(f.split("/")[-1].rsplit("-", 2)[1]) for f in glob.glob(f"{out}/engine/run1/runs/*-steps.csv")})
    print("label        batch  steps  drafting ms engine / sim (sim over engine)   rest ms engine / sim")
    for label in labels:
        by_b = {}
        for c in concs:
            e = steps(f"{out}/engine/run*/runs/{label}-{c}-steps.csv")
            s = steps(f"{out}/sim/draw*/runs/{label}-{c}-steps.csv")
            for b in sorted({int(r["batch_size"]) for r in e}):
                ed, er, n = medians(e, b)
                sd, sr, _ = medians(s, b)
                if n < 20:  # a few tail steps: too few to read
                    continue
                by_b.setdefault(b, (ed, sd))  # batch 1: the concurrency-1 run's, not a tail's
                ratio = f"{sd / ed - 1:+6.1%}" if ed > 0 else "    - "
                print(f"{label:12} {b:5} {n:6}  {ed * 1e3:8.2f} / {sd * 1e3:8.2f} ({ratio})"
                      f"        {er * 1e3:8.2f} / {sr * 1e3:8.2f} ({sr / er - 1:+6.1%})")
        lo, hi = min(by_b, default=0), max(by_b, default=0)
        if hi > lo and by_b[lo][0] > 0:
            e_slope = (by_b[hi][0] - by_b[lo][0]) / (hi - lo)
            s_slope = (by_b[hi][1] - by_b[lo][1]) / (hi - lo)
            print(f"{label:12} drafting per added sequence, batch {lo} -> {hi}: engine {e_slope * 1e3:.3f} ms, "
                  f"simulator {s_slope * 1e3:.3f} ms ({s_slope / e_slope - 1:+.1%})")


if __name__ == "__main__":
    main(sys.argv[1])
