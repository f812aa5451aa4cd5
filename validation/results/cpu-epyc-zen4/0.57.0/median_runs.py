"""Each entry of a comparison: the median simulator draw's throughput against the median engine run's, beside
the pooled error (what `median_run_throughput` gives since 0.57.0, for comparisons made before it).
It needs every draw's report (DIR/sim/drawN/report.json), which the kept results do not carry.

    python validation/results/cpu-epyc-zen4/0.57.0/median_runs.py COMPARE_DIR
"""
import glob
import json
import statistics
import sys


def main(d: str) -> None:
    c = json.load(open(f"{d}/comparison.json"))
    draws: dict = {}
    for f in sorted(glob.glob(f"{d}/sim/draw*/report.json")):
        for r in json.load(open(f))["runs"]:
            draws.setdefault((r["label"], r["concurrency"]), []).append(r["summary"]["throughput_tok_s"])
    by: dict = {}
    for r in c["runs"]:
        k = (r["label"], r["concurrency"])
        if k not in draws:
            continue
        mid = statistics.median(draws[k]) / statistics.median(r["engine_throughputs"]) - 1
        pooled = r["errors"]["throughput_tok_s"]
        print(f"{k[0]:>10} {k[1]:>3} median run {mid * 100:+.1f}%  pooled {pooled * 100:+.1f}%")
        by.setdefault(k[1], []).append((abs(mid), abs(pooled)))
    for cc, v in by.items():
        m, p = [x for x, _ in v], [y for _, y in v]
        print(f"concurrency {cc}: median |error| median run {statistics.median(m) * 100:.1f}% "
              f"({sum(x <= .05 for x in m)} of {len(m)} within 5%), pooled {statistics.median(p) * 100:.1f}% "
              f"({sum(y <= .05 for y in p)})")


if __name__ == "__main__":
    main(sys.argv[1])
