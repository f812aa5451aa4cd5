"""The narrow-row curve for the decoding sequences only: each grid's points (the same engine
timings) priced without it; with it for the decoding sequences' share of each layer's gather
(that share of the layer's gather time moved to the narrow curve's price, the chains' fused path
left on the wide one); and with it everywhere. It needs the narrow-row curves, which 0.48.0
tried and did not keep: run it from the repository root at 8dc727f, with absolute grid paths:

  python validation/results/cpu-epyc-zen3/0.48.0/decode_only_reprice.py GRID_DIR [GRID_DIR ...]
"""
import json, statistics, sys
from dataclasses import replace
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[4]))
from sim.cost import ForwardCost
from sim.hardware import hardware_from_node
from sim.models import model_from_node
from sim.specio import Node
from validation.steptime import ROOT, MODELS, predict, work_of

def summ(errs):
    a = sorted(abs(e) for e in errs)
    return f"{statistics.median(a):5.1%} / {a[int(0.9*len(a))]:5.1%} ({statistics.median(errs):+5.1%})"

specs = {(n if not ch else f"{n}-scaled"): replace(model_from_node(Node(n, "steptime", "model"), ROOT), **ch, bytes_per_weight=4.0, bytes_per_kv=4.0) for n, ch in MODELS["cpu"]}
for d in map(Path, sys.argv[1:]):
    prof = d / "measured-hardware.yaml"
    hw = hardware_from_node(Node(str(prof), str(prof), "hardware"), ROOT)
    wide = replace(hw, kv_sizes_narrow=(), kv_sizes_narrow_warm=(), kv_row_bytes=0.0, kv_narrow_row_bytes=0.0)
    pts = json.load(open(d / "steptime.json"))["points"]
    e_w, e_d, e_n = [], [], []
    for p in pts:
        p = {**p, "tree": tuple(p["tree"])}
        spec = specs[p["model"]]
        base = predict(spec, wide, p)
        w = work_of(p)
        fn = ForwardCost(spec, hw.for_weights(spec.weight_bytes)); fw = ForwardCost(spec, wide.for_weights(spec.weight_bytes))
        b = fn.kv_tok * (w.kv_read + w.tokens)
        dec = p["batch"] - p.get("drafting", p["batch"]) if p["tree"] else p["batch"]
        if p["kind"].startswith("prefill"): dec = 0
        b_dec = fn.kv_tok * dec * (p["context"] + 1)
        extra = fn.n_layers * (b_dec / b) * (fn.kv_time(b) - fw.kv_time(b)) if b else 0.0
        m = p["measured"]
        e_w.append((base - m) / m); e_d.append((base + extra - m) / m); e_n.append((predict(spec, hw, p) - m) / m)
    print(d.name, "| wide", summ(e_w), "| narrow for decoding seqs only", summ(e_d), "| narrow everywhere", summ(e_n))
    fam = [i for i, p in enumerate(pts) if p["model"] == "tiny"]
    print("   family:", summ([e_w[i] for i in fam]), "|", summ([e_d[i] for i in fam]), "|", summ([e_n[i] for i in fam]))
