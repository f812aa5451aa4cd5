"""Ran on 0.31.0, 2026-12-04 12:43, `python family_vs_probe.py 8` (family_vs_probe.txt): the family's
bare decode forward at contexts 8, 200 and 600 (trained and random weights) interleaved call by
call with the layer probes' 1-, 4- and 6-layer forwards of its shape."""
import sys, statistics
sys.path.insert(0, "/work/main")
import torch; torch.set_num_threads(1)
from pathlib import Path
from sim.spec import load_trace
from engine.checkpoint import resolve
from validation.steptime import point_call
from validation.host_probes import forward_probe
from validation.probes import EW_SPEC
from validation.timing import interleaved_times
trace = load_trace(Path("/work/main/traces/family-schemes.yaml"))
source = resolve(trace); model = source.build()
print(source.spec); print(EW_SPEC)
fns = {f"fam_ctx{c}": point_call(model, dict(batch=1, context=c, q=1, tree=()), "cpu") for c in (8, 200, 600)}
fns |= {f"probe{L}": forward_probe(L, "cpu", shape=EW_SPEC) for L in (1, 4, 6)}
from engine.model import Model
from dataclasses import replace
rnd = Model.random(replace(source.spec), seed=0, device="cpu")
fns |= {f"famrandom_ctx{c}": point_call(rnd, dict(batch=1, context=c, q=1, tree=()), "cpu") for c in (8, 200)}
res = {k: [] for k in fns}
for r in range(int(sys.argv[1])):
    got = interleaved_times(fns, "cpu", 10)
    for k, v in got.items(): res[k].append(v)
    print(r, {k: round(v * 1e3, 3) for k, v in got.items()}, flush=True)
print("median", {k: round(statistics.median(v) * 1e3, 3) for k, v in res.items()})
