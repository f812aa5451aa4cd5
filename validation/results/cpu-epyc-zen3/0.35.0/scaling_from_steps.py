"""validation.scaling.batch_scaling over a comparison directory's stored step files (engine/runN and sim/drawN
runs/*-steps.csv): python validation/results/cpu-epyc-zen3/0.35.0/scaling_from_steps.py DIR"""
import csv
import glob
import sys
from types import SimpleNamespace
import numpy as np
from validation.scaling import batch_scaling
out = sys.argv[1]
def load(d):
    runs = {}
    for f in glob.glob(f"{d}/runs/*-steps.csv"):
        tag = f.split("/")[-1][:-len("-steps.csv")]
        rows = list(csv.DictReader(open(f)))
        cols = {k: np.array([float(r[k]) for r in rows]) for k in ("duration", "draft_time")}
        cols |= {k: np.array([int(float(r[k])) for r in rows]) for k in ("batch_size", "prefill_tokens")}
        runs[tag] = SimpleNamespace(steps=SimpleNamespace(columns=lambda c=cols: c))
    return runs
eng = [load(d) for d in sorted(glob.glob(f"{out}/engine/run[0-9]*"))]
sim = [load(d) for d in sorted(glob.glob(f"{out}/sim/draw*"))]
for lab, rows in batch_scaling(eng, sim).items():
    r = rows[0]; d = r.get("drafting")
    print(f"{lab:10} step {r['engine']:.3f} ±{r['engine_se']*100:.1f}% / {r['sim']:.3f} ({r['error']*100:+.1f}%)" + (f"  drafting {d['engine']:.3f} ±{d['engine_se']*100:.1f}% / {d['sim']:.3f} ({d['error']*100:+.1f}%)" if d else ""))
