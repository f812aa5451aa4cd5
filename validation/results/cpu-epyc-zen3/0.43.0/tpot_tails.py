"""Where a comparison's TPOT p99 comes from (2026-12-05, 0.43.0): for each scheme and
concurrency of a comparison DIR (python -m validation compare ... --out DIR), the engine's
per-request TPOT ((finish - first token) / (output tokens - 1), from DIR/engine/run*/runs/
LABEL-C-requests.csv) run by run: each run's median and p99, the pooled p99 (what the comparison
reads), and which run holds the pooled p99's requests; beside it the comparison's TPOT p99
error. Light: reads CSV files only.

  python validation/results/cpu-epyc-zen3/0.43.0/tpot_tails.py DIR
"""
from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import numpy as np


def tpots(path: Path) -> list[float]:
    rows = list(csv.DictReader(path.open()))
    return [(float(r["finish"]) - float(r["first_token"])) / (int(r["output_tokens"]) - 1)
            for r in rows if int(r["output_tokens"]) > 1]


def main(root: Path) -> None:
    errors = {(r.get("label", r["scheme"]), r["concurrency"]): r["errors"]["tpot_p99"]
              for r in json.loads((root / "comparison.json").read_text())["runs"]}
    print(f"{root}: engine TPOT by run, ms (median / p99); pooled p99; runs holding the requests above the pooled p99")
    for (label, c), err in errors.items():
        runs = sorted(root.glob(f"engine/run*/runs/{label}-{c}-requests.csv"), key=lambda p: int(p.parent.parent.name[3:]))
        if not runs:
            continue
        per = [np.array(tpots(p)) for p in runs]
        pooled = np.concatenate(per)
        p99 = float(np.percentile(pooled, 99))
        holders = [i + 1 for i, v in enumerate(per) if (v >= p99).any()]
        cells = " ".join(f"{np.median(v) * 1e3:5.2f}/{np.percentile(v, 99) * 1e3:5.2f}" for v in per)
        spread = max(np.median(v) for v in per) / min(np.median(v) for v in per)
        print(f"{label:10} {c:3}  {cells}  pooled p99 {p99 * 1e3:5.2f}  at runs {holders}  "
              f"run medians max/min {spread:.2f}  sim error {err * 100:+.1f}%")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
