"""How far apart a comparison's requests are, engine against simulator: for each scheme and
concurrency, the standard deviation across requests of the verified steps each took (the median
over runs or draws) and a run's slowest request's steps (the median over runs or draws), beside
the entry's TPOT p99 (run by run) and p50 errors and the acceptance file's dispersion factor.
Reads a comparison directory with its per-request CSVs (engine/runN/runs, sim/drawN/runs).

    python spread.py DIR [DIR ...]
"""
import csv
import json
import sys
from pathlib import Path

import numpy as np


def steps(root: Path, side: str, label: str, c: int) -> list[np.ndarray]:
    out = []
    for p in sorted(root.glob(f"{side}*/runs/{label}-{c}-requests.csv")):
        rows = sorted(csv.DictReader(p.open()), key=lambda r: int(r["id"]))
        out.append(np.array([int(r["steps"]) for r in rows]))
    return out


def main(dirs: list[str]) -> None:
    for d in dirs:
        root = Path(d)
        comp = json.loads((root / "comparison.json").read_text())
        shrink = {}
        for p in root.glob("acceptance-*.json"):
            rec = json.loads(p.read_text()).get("dispersion")
            shrink[p.stem[len("acceptance-"):]] = rec["shrink"] if rec else None
        print(f"== {root}")
        print(f"{'scheme':10} {'c':>2}  {'sd engine':>9} {'sim':>5}  {'max engine':>10} {'sim':>5}  {'TPOT p99':>8} {'p50':>6}  lambda")
        wider = 0
        for r in comp["runs"]:
            label, c = r["label"], r["concurrency"]
            e, s = steps(root, "engine/run", label, c), steps(root, "sim/draw", label, c)
            if not e or not s:
                continue
            sd_e, sd_s = np.median([x.std() for x in e]), np.median([x.std() for x in s])
            wider += sd_s > sd_e + 1e-9
            lam = shrink.get(label)
            print(f"{label:10} {c:>2}  {sd_e:9.2f} {sd_s:5.2f}  {np.median([x.max() for x in e]):10.1f} "
                  f"{np.median([x.max() for x in s]):5.1f}  {r['errors']['tpot_p99'] * 100:+7.1f}% "
                  f"{r['errors']['tpot_p50'] * 100:+5.1f}%  {lam if lam is not None else '-'}")
        print(f"the simulator's requests spread wider than the engine's in {wider} of {len(comp['runs'])} entries\n")


if __name__ == "__main__":
    main(sys.argv[1:])
