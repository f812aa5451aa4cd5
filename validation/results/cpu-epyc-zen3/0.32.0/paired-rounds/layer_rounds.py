"""Ran on 0.31.0 (c24b0df), 2026-12-04 12:33, `python layer_rounds.py 10` (writes /tmp/d/layerexp.json,
layer_rounds.txt is its output). Per calibration round: the profile from that round's calls alone prices the family's bare
forwards (c1 decode, c1 verify q=3, c4 decode); beside them the forwards timed right after."""
import json, sys, time, statistics
from pathlib import Path
import torch
torch.set_num_threads(1)
sys.path.insert(0, "/work/main")
from sim.spec import load_trace
from sim.hardware import hardware_from_node
from sim.specio import Node
from engine.checkpoint import resolve
from validation.calibrate import for_trace
from validation.profile import write_profile
from validation.steptime import point_call, work_of, bare_forward
from validation.timing import mean_time
ROOT = Path("/work/main")
trace = load_trace(ROOT / "traces/family-schemes.yaml")
source = resolve(trace)
model = source.build()
spec = source.spec
cal = for_trace(trace, spec)
pts = {"c1d": dict(batch=1, context=200, q=1, tree=()), "c1v": dict(batch=1, context=200, q=3, tree=()),
       "c4d": dict(batch=4, context=200, q=1, tree=()), "c32d": dict(batch=32, context=200, q=1, tree=())}
calls = {k: point_call(model, p, "cpu") for k, p in pts.items()}
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 8
meas = {k: [] for k in pts}
for r in range(rounds):
    t0 = time.time()
    cal.round()
    for k, c in calls.items():
        meas[k].append(mean_time(c, "cpu", 10, warm=True))
    print(f"round {r} {time.time()-t0:.0f}s", {k: round(v[-1]*1e3, 3) for k, v in meas.items()},
          "layer1/6", round(cal.samples["layer1"][-1]*1e3, 3), round(cal.samples["layer6"][-1]*1e3, 3),
          "fwd1/6", round(cal.samples["forward1"][-1]*1e3, 3), round(cal.samples["forward6"][-1]*1e3, 3), flush=True)
from validation.calibrate import allocator_op
alloc = allocator_op()
def hw_of(samples):
    f = cal.figures_of(samples, alloc)
    p = Path("/tmp/d/hw.yaml"); p.write_text(write_profile(f, cal.size_mb))
    return f, hardware_from_node(Node(str(p), str(p), "hardware"), ROOT)
out = []
for r in range(rounds):
    f, hw = hw_of({k: [v[r]] for k, v in cal.samples.items()})
    row = {"layer_s": f["layer_s"], "probe_layer_s": f["probe_layer_s"]}
    row |= {k: bare_forward(spec, hw, work_of(p)) / meas[k][r] for k, p in pts.items()}
    out.append(row)
    print(r, {k: round(v * (1e6 if k.endswith("_s") else 1), 3) for k, v in row.items()})
f, hw = hw_of(cal.samples)
print("pooled", round(f["layer_s"]*1e6), {k: round(bare_forward(spec, hw, work_of(p)) / statistics.mean(meas[k]), 3) for k, p in pts.items()})
json.dump({"samples": {str(k): v for k, v in cal.samples.items()}, "meas": meas, "rows": out}, open("/tmp/d/layerexp.json", "w"))
