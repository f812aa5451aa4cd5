"""The target's pass, priced against the engine's, scheme by scheme: from a comparison's per-step
CSVs (DIR/engine/run*/runs, DIR/sim/draw*/runs; `python -m validation compare` writes them, the
results folders do not keep them).

    python validation/results/cpu-epyc-zen4/0.53.0-c32/passes.py DIR CONCURRENCY

For each scheme, the steps with every sequence in the batch (batch size = CONCURRENCY) and no
prefill chunk, their drafting taken off (duration - draft_time): by query tokens a pass (20 steps
or more on both sides), the simulator's median over the engine's, and over all those the
simulator's over the engine's, each token count weighted by the engine's steps; then the median of
all those steps (ms), the engine's and the simulator's."""
import collections
import csv
import glob
import statistics
import sys

LABELS = ("none", "ngram", "draft", "mtp1", "mtp2", "eagle", "eagle-tree", "eagle2", "medusa")


def passes(files: list[str], c: int) -> dict[int, list[float]]:
    """Query tokens a pass -> the seconds of each full-batch, prefill-free step less its drafting."""
    by = collections.defaultdict(list)
    for f in files:
        with open(f) as fh:
            for row in csv.DictReader(fh):
                if int(float(row["prefill_tokens"])) or int(float(row["batch_size"])) != c:
                    continue
                by[int(float(row["query_tokens"]))].append(float(row["duration"]) - float(row["draft_time"] or 0))
    return by


def main(folder: str, conc: str) -> None:
    c = int(conc)
    for label in LABELS:
        e = passes(glob.glob(f"{folder}/engine/run*/runs/{label}-{c}-steps.csv"), c)
        s = passes(glob.glob(f"{folder}/sim/draw*/runs/{label}-{c}-steps.csv"), c)
        keys = [k for k in sorted(e) if len(e[k]) >= 20 and len(s.get(k, ())) >= 20]
        if not keys:
            continue
        med = {k: (statistics.median(s[k]), statistics.median(e[k])) for k in keys}
        whole = sum(med[k][0] * len(e[k]) for k in keys) / sum(med[k][1] * len(e[k]) for k in keys)
        parts = " ".join(f"{k}:{med[k][0] / med[k][1]:.2f}({len(e[k])})" for k in keys[:6])
        pooled = [statistics.median(x for k in keys for x in side[k]) * 1e3 for side in (e, s)]
        print(f"{label:11} {whole:.3f}  by query tokens (engine steps): {parts}  |  median engine {pooled[0]:.2f} ms,"
              f" simulator {pooled[1]:.2f} ms")


if __name__ == "__main__":
    main(*sys.argv[1:])
