"""Are the step-time grid's misses where a step's KV evicts the weights from the last-level cache?
The grid prices a model whose weights fit the cache on the warm matmul curves at every point
(HardwareSpec.for_weights); here each point of a grid run whose model fits is priced both warm
and cold (resident_bytes 0: the curves timed with the weights read from memory), beside the
step's working set, the weights plus every layer's KV read, over the cache. Points above 0.8 of
it are listed; then the signed median by band. Run from the repository root with the project's
environment (a few seconds, no timing):

  python validation/results/cpu-epyc-zen3/0.47.0/eviction_check.py STEPTIME_DIR
"""
import json
import statistics as st
import sys
from dataclasses import replace
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[4]))
from sim.hardware import hardware_from_node
from sim.specio import Node
from sim.cost import ForwardCost
from sim.models import model_from_node
from validation.steptime import work_of, MODELS, ROOT
path = sys.argv[1]
d = json.load(open(path + "/steptime.json"))
prof = path + "/measured-hardware.yaml"
hw = hardware_from_node(Node(prof, prof, "hardware"), Path("."))
specs = {}
for name, changes in MODELS["cpu"]:
    spec = replace(model_from_node(Node(name, "steptime", "model"), ROOT), **changes, bytes_per_weight=4.0, bytes_per_kv=4.0)
    specs[spec.name if not changes else f"{spec.name}-scaled"] = spec
rows = []
for p in d["points"]:
    spec = specs[p["model"]]
    if spec.weight_bytes > hw.cache_bytes:
        continue
    p = {**p, "tree": tuple(p["tree"])}  # a grid before 0.47.0 names no drafting: all verify (steptime.layout)
    w = work_of(p)
    kv_total = spec.layers * spec.kv_elems_per_token_layer * spec.bytes_per_kv * (w.kv_read + w.tokens)
    warm_hw = replace(hw.for_weights(spec.weight_bytes), logit_s=0.0)
    cold_hw = replace(hw, resident_bytes=0.0, logit_s=0.0)
    extra = hw.pass_overhead_s + hw.index_check_s
    warm = ForwardCost(spec, warm_hw)(w).time + extra
    cold = ForwardCost(spec, cold_hw)(w).time + extra
    over = (spec.weight_bytes + kv_total) / hw.cache_bytes
    rows.append((over, p["kind"], p["batch"], p["context"], p["measured"], warm, cold))
rows.sort()
for over, kind, B, ctx, m, warm, cold in rows:
    if over > 0.8:
        print(f"{kind:10s} B={B:<3d} ctx={ctx:<5d} (weights+KV)/LLC {over:5.2f}  warm {100*(warm/m-1):+6.1f}%  cold {100*(cold/m-1):+6.1f}%")
for lo, hi in ((0, 0.8), (0.8, 1.0), (1.0, 2.0), (2.0, 99)):
    sel = [r for r in rows if lo <= r[0] < hi]
    if sel:
        print(f"over {lo}-{hi}: {len(sel)} points, warm signed median {100*st.median(r[5]/r[4]-1 for r in sel):+.1f}%, cold {100*st.median(r[6]/r[4]-1 for r in sel):+.1f}%")
