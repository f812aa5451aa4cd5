"""The H200 step-time grid priced as the simulator composes a pass (host time + device time) and
with the two overlapped, t = max(host, device) + beta * min(host, device): the host launches
kernels ahead of the device on a GPU. Offline, from a run's profile and steptime.json:

    python validation/results/h200/0.34.0/overlap.py PROFILE STEPTIME_JSON

Host time: the profile's per-pass host figures (launch_us, pass_overhead_us, index_check_us, the
query terms); device time: the price with those set to 0."""
import json, statistics as st, sys
from dataclasses import replace
from validation.steptime import MODELS, work_of, bare_forward, ROOT
from sim.specio import Node
from sim.models import model_from_node
from sim.hardware import hardware_from_node
hwp = sys.argv[1]; grid = json.load(open(sys.argv[2]))
hw = hardware_from_node(Node(hwp, hwp, "hardware"), ROOT)
specs = {}
for name, changes in MODELS["gpu"]:
    spec = replace(model_from_node(Node(name, "steptime", "model"), ROOT), **changes, bytes_per_weight=2.0, bytes_per_kv=2.0)
    specs[spec.name if not changes else f"{spec.name}-scaled"] = spec
HOST = dict(launch_s=0.0, pass_overhead_s=0.0, index_check_s=0.0, multi_query_s=0.0, batch_query_s=0.0, mixed_query_s=0.0)
dev_hw = replace(hw, **HOST)
rows = []
for p in grid["points"]:
    p = {**p, "tree": tuple(p["tree"])}
    spec = specs[p["model"]]
    w = work_of(p)
    tot = bare_forward(spec, hw, w)
    dev = bare_forward(spec, dev_hw, w)
    host = tot - dev
    ov = max(host, dev)
    rows.append((p, tot, dev, host, ov))
def summ(name, errs):
    a = sorted(abs(e) for e in errs)
    print(f"{name}: median |err| {st.median(a):.1%} p90 {a[int(0.9*len(a))]:.1%} signed median {st.median(errs):+.1%}")
for model in specs:
    sel = [r for r in rows if r[0]["model"] == model]
    summ(model + " sum    ", [(r[1] - r[0]["measured"]) / r[0]["measured"] for r in sel])
    summ(model + " overlap", [(r[4] - r[0]["measured"]) / r[0]["measured"] for r in sel])
    big = sorted(sel, key=lambda r: -r[2] / r[1])[:8]
    for p, tot, dev, host, ov in big:
        print(f"   {p['kind']:10} B={p['batch']:3} ctx={p['context']:5} meas {p['measured']*1e3:6.2f} ms  sum {tot*1e3:6.2f} dev {dev*1e3:6.2f} host {host*1e3:6.2f} ov {ov*1e3:6.2f}")
summ("all sum    ", [(r[1] - r[0]["measured"]) / r[0]["measured"] for r in rows])
summ("all overlap", [(r[4] - r[0]["measured"]) / r[0]["measured"] for r in rows])
print("beta scan: t = max(host, device) + beta * min(host, device)")
for beta in (0.0, 0.25, 0.5, 0.75, 1.0):
    errs = [(max(h, d) + beta * min(h, d) - p["measured"]) / p["measured"] for p, tot, d, h, ov in rows]
    summ(f"  beta {beta:.2f}", errs)
print("launch-only overlap: t = fixed host + max(launch host, device)")
launch_hw = replace(hw, launch_s=0.0)
errs = []
for p, tot, d, h, ov in rows:
    spec = specs[p["model"]]
    w = work_of({**p, "tree": tuple(p["tree"])})
    no_launch = bare_forward(spec, launch_hw, w)
    launch = tot - no_launch          # the kernels' launches: overlap the device's work
    fixed = h - launch                # pass overhead, index check, query terms: before the kernels
    errs.append((fixed + max(launch, d) - p["measured"]) / p["measured"])
summ("  launch-only", errs)
for model in specs:
    summ("  launch-only " + model, [e for e, r in zip(errs, rows) if r[0]["model"] == model])
