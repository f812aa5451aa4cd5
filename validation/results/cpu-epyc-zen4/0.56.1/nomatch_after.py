"""ngram's steps that found no match (one query token) against none's, in a comparison's engine step logs
(COMPARE_DIR/engine/run*/runs/*-steps.csv, which the results folder does not keep): each scheme's
whole decode steps at CONCURRENCY (no prefill, every sequence in) by query tokens and by the
step before (after the prefill, or its query tokens) and by allocator operations; each the
median and mean of the step's clock less its drafting (ms).

    python validation/results/cpu-epyc-zen4/0.56.1/nomatch_after.py COMPARE_DIR CONCURRENCY"""
import csv
import glob
import statistics
import sys


def load(d: str, c: int, label: str) -> list[list[dict]]:
    """Each engine run's step log of `label` at concurrency `c` under the comparison `d`."""
    return [list(csv.DictReader(open(f))) for f in sorted(glob.glob(f"{d}/engine/run*/runs/{label}-{c}-steps.csv"))]


def clock_ms(row: dict) -> float:
    return (float(row["duration"]) - float(row["draft_time"] or 0)) * 1e3


def main(d: str, c: int) -> None:
    for label in ("none", "ngram"):
        groups: dict = {}
        for rows in load(d, c, label):
            prev = None
            for r in rows:
                q = int(float(r["query_tokens"]))
                if not int(float(r["prefill_tokens"])) and int(float(r["batch_size"])) == c:
                    after = "after-prefill" if prev is None or int(float(prev["prefill_tokens"])) \
                        else f"prev q={int(float(prev['query_tokens']))}"
                    groups.setdefault((q, after), []).append(clock_ms(r))
                    groups.setdefault((q, f"allocs={r['page_allocs']} frees={r['page_frees']}"), []).append(clock_ms(r))
                prev = r
        for (q, key), v in sorted(groups.items()):
            if len(v) >= 20 and q <= 5:
                print(f"{label:6s} q={q} {key:22s} n={len(v):5d} median {statistics.median(v):.3f} mean {statistics.mean(v):.3f}")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
