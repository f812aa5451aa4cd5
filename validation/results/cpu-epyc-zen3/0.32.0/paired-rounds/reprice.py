"""Ran on 0.31.0 (c24b0df, whose calibration still had the `adjacent` and `shapeadj` probes),
`python reprice.py /tmp/d/layerexp.json` (reprice.txt). The family's bare forwards of layer_rounds.py priced under
each round's profile with launch_us taking off the products timed back to back (0.31.0) or
priced on the warm curves (0.32.0), over the same forwards' times."""
import sys, json, ast, statistics
sys.path.insert(0, "/work/main")
import torch; torch.set_num_threads(1)
from pathlib import Path
from sim.spec import load_trace
from sim.hardware import hardware_from_node
from sim.specio import Node
from engine.checkpoint import resolve
from validation.calibrate import for_trace, allocator_op
from validation.profile import write_profile
from validation.steptime import work_of, bare_forward
ROOT = Path("/work/main")
trace = load_trace(ROOT / "traces/family-schemes.yaml")
spec = resolve(trace).spec
cal = for_trace(trace, spec)
d = json.load(open(sys.argv[1]))
S = {}
for k, v in d["samples"].items():
    try: S[ast.literal_eval(k)] = v
    except Exception: S[k] = v
meas = d["meas"]
pts = {"c1d": dict(batch=1, context=200, q=1, tree=()), "c1v": dict(batch=1, context=200, q=3, tree=()),
       "c4d": dict(batch=4, context=200, q=1, tree=()), "c32d": dict(batch=32, context=200, q=1, tree=())}
alloc = allocator_op()
def hw_of(samples):
    f = cal.figures_of(samples, alloc)
    p = Path("/tmp/d/hw2.yaml"); p.write_text(write_profile(f, cal.size_mb))
    return f, hardware_from_node(Node(str(p), str(p), "hardware"), ROOT)
W = dict(S)
for k in S:
    if isinstance(k, tuple) and k[0] in ("adjacent", "shapeadj"):
        W[k] = S[("warm" if k[0] == "adjacent" else "shapew",) + k[1:]]
n = len(meas["c1d"])
for name, samp in (("adjacent", S), ("warm", W)):
    rows = []
    for r in range(n):
        f, hw = hw_of({k: [v[r]] for k, v in samp.items()})
        rows.append({k: bare_forward(spec, hw, work_of(p)) / meas[k][r] for k, p in pts.items()} | {"layer_us": f["layer_s"] * 1e6})
    print(name, "per round:", [{k: round(v, 3) for k, v in row.items()} for row in rows])
    print(name, "median of rounds", {k: round(statistics.median(row[k] for row in rows), 3) for k in rows[0]})
    f, hw = hw_of(samp)
    print(name, "pooled", round(f["layer_s"] * 1e6), {k: round(bare_forward(spec, hw, work_of(p)) / statistics.mean(meas[k]), 3) for k, p in pts.items()})
