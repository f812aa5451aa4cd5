"""The 0.32.0 grid's measured points priced under its profile, and under the same profile with
pass_overhead_us + 2 x launch_us (the LM head's launches charged twice, as before 0.32.0)."""
import json, re, statistics as st, sys
from dataclasses import replace
from pathlib import Path
from sim.hardware import hardware_from_node
from sim.specio import Node
from validation.steptime import predict, ROOT, MODELS, model_from_node, summary
d = json.load(open(sys.argv[1]))
hwp = Path(sys.argv[2])
specs = {}
for name, changes in MODELS["cpu"]:
    s = replace(model_from_node(Node(name, "steptime", "model"), ROOT), **changes, bytes_per_weight=4.0, bytes_per_kv=4.0)
    specs[s.name if not changes else f"{s.name}-scaled"] = s
text = hwp.read_text()
launch = float(re.search(r"^launch_us: ([\d.]+)", text, re.M).group(1))
po = float(re.search(r"^pass_overhead_us: ([\d.]+)", text, re.M).group(1))
old = re.sub(r"^pass_overhead_us: [\d.]+", f"pass_overhead_us: {po + 2 * launch:.2f}", text, flags=re.M)
Path("/tmp/d/old-hw.yaml").write_text(old)
for label, path in (("0.32.0", hwp), ("LM head twice", Path("/tmp/d/old-hw.yaml"))):
    hw = hardware_from_node(Node(str(path), str(path), "hardware"), ROOT)
    errs = {}
    for p in d["points"]:
        q = {**p, "tree": tuple(p["tree"])}
        errs.setdefault(p["model"], []).append((predict(specs[p["model"]], hw, q) - p["measured"]) / p["measured"])
    allerr = [e for v in errs.values() for e in v]
    s = summary(allerr)
    print(label, {k: round(v, 4) if isinstance(v, float) else v for k, v in s.items()},
          {m: (round(st.median(abs(e) for e in v), 4), round(st.median(v), 4)) for m, v in errs.items()})
