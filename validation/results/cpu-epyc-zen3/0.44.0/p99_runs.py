"""How a comparison's TPOT p99 reads run by run against pooled (2026-12-06, 0.44.0): for each
scheme and concurrency of a comparison DIR (python -m validation compare ... --out DIR), from the
per-request CSV files of the engine's runs (DIR/engine/run*/runs/) and the simulator's draws
(DIR/sim/draw*/runs/):
- the engine's pooled p99 (over all its runs' requests), the mean of the simulator's over its
  groups of as many draws (what 0.43.0 compared), and that error;
- where the engine's pooled p99 falls among 400 of the simulator's: groups of as many draws
  drawn without replacement from all of them (percentile, and the 5th-95th band);
- the ratio of the slowest run's median TPOT to the fastest's, the engine's against the median
  of the simulator's groups';
- each run's own p99, the median over the runs, the engine's against the simulator's over all
  its draws, and that error (what 0.44.0 compares).
Light: reads CSV files only.

  python validation/results/cpu-epyc-zen3/0.44.0/p99_runs.py DIR
"""
from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import numpy as np


def tpots(path: Path) -> np.ndarray:
    rows = list(csv.DictReader(path.open()))
    return np.array([(float(r["finish"]) - float(r["first_token"])) / (int(r["output_tokens"]) - 1)
                     for r in rows if int(r["output_tokens"]) > 1])


def numbered(paths, part: int) -> list[Path]:
    return sorted(paths, key=lambda p: int("".join(ch for ch in p.parents[part].name if ch.isdigit())))


def main(root: Path) -> None:
    rng = np.random.default_rng(0)
    print(f"{root}: TPOT p99, ms")
    print(f"{'scheme':10} {'c':>2} {'eng pooled':>10} {'sim groups':>10} {'error':>7} {'eng pct':>7} {'sim 5-95':>17} | "
          f"{'run medians max/min eng / sim':>29} | {'run p99 median eng':>18} {'sim':>7} {'error':>7}")
    for r in json.loads((root / "comparison.json").read_text())["runs"]:
        label, c = r["label"], r["concurrency"]
        eng = [tpots(p) for p in numbered(root.glob(f"engine/run*/runs/{label}-{c}-requests.csv"), 1)]
        sim = [tpots(p) for p in numbered(root.glob(f"sim/draw*/runs/{label}-{c}-requests.csv"), 1)]
        n = len(eng)
        if not n or len(sim) < n:
            continue
        pooled = np.percentile(np.concatenate(eng), 99)
        starts = range(0, len(sim) - n + 1, n)
        groups = np.mean([np.percentile(np.concatenate(sim[g:g + n]), 99) for g in starts])
        boot = np.array([np.percentile(np.concatenate([sim[i] for i in rng.choice(len(sim), n, replace=False)]), 99)
                         for _ in range(400)])
        lo, hi = np.percentile(boot, [5, 95])
        spread = lambda runs: max(np.median(v) for v in runs) / min(np.median(v) for v in runs)  # noqa: E731
        eng_run = np.median([np.percentile(v, 99) for v in eng])
        sim_run = np.median([np.percentile(v, 99) for v in sim])
        print(f"{label:10} {c:2} {pooled * 1e3:10.2f} {groups * 1e3:10.2f} {(groups / pooled - 1) * 100:+6.1f}% "
              f"{(boot < pooled).mean() * 100:6.1f}% {lo * 1e3:8.2f}-{hi * 1e3:8.2f} | "
              f"{spread(eng):14.2f} / {np.median([spread(sim[g:g + n]) for g in starts]):.2f} {'':9} | "
              f"{eng_run * 1e3:18.2f} {sim_run * 1e3:7.2f} {(sim_run / eng_run - 1) * 100:+6.1f}%")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
