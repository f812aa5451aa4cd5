"""The step-time grid's points repredicted from the run's own profile, with and without gemm_step
(2026-12-05, 0.41.0). Run from the repository root with the project's environment:

  python validation/results/cpu-epyc-zen3/0.41.0/steptime_without_step.py DIR

DIR is a `python -m validation steptime --out DIR` folder. Not timing-sensitive: it reads the
measured times from DIR/steptime.json and prices each point as steptime does (steptime.predict).
"""
import json
import statistics as st
import sys
from dataclasses import replace
from pathlib import Path
from sim.hardware import hardware_from_node
from sim.models import model_from_node
from sim.specio import Node
from validation.steptime import MODELS, predict
d = Path(sys.argv[1])
data = json.load(open(d / "steptime.json"))
hw = hardware_from_node(Node(str(d / "measured-hardware.yaml"), None, "hardware"), Path("."))
ROOT = Path(".")
specs = {}
for name, changes in MODELS["cpu"]:
    s = replace(model_from_node(Node(name, "steptime", "model"), ROOT), **changes, bytes_per_weight=4.0, bytes_per_kv=4.0)
    specs[s.name if not changes else f"{s.name}-scaled"] = s
for label, h in (("with gemm_step", hw), ("without", replace(hw, gemm_step=()))):
    errs = {}
    for p in data["points"]:
        pp = dict(p, tree=tuple(p["tree"]))
        e = predict(specs[p["model"]], h, pp) / p["measured"] - 1
        errs.setdefault("all", []).append(e); errs.setdefault(p["model"], []).append(e); errs.setdefault(p["kind"].rstrip("0123456789"), []).append(e)
    for k, v in errs.items():
        a = sorted(abs(x) for x in v)
        print(f"{label:15} {k:22} n={len(v):3} median |e| {100*st.median(a):.1f}% p90 {100*a[int(0.9*(len(a)-1))]:.1f}% signed {100*st.median(v):+.1f}%")
