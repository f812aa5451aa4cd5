"""Real-sized layers (the trained family's shape, validation.probes.EW_SPEC with its 4,096-token
vocabulary) against their price, by batch and draft shape (2026-12-04, 0.36.0). From the repository
root with the project's environment, alone:

  python validation/results/cpu-epyc-zen3/0.36.0/layers.py SECONDS [PROFILE] [wide]

Bare forwards of random 1- and 6-layer models over the step-time grid's batches
(validation.steptime.point_call, context 128): decodes, 2- and 5-node chains and a 16-node EAGLE
tree at 1 and 4 sequences, all their calls interleaved one by one (validation.timing.
interleaved_times, 5 calls a round) for SECONDS. Per layer (6 layers less 1, over 5): the median
over rounds against the simulator's price on PROFILE (default: 0.35.0's family comparison's
measured profile), and the residual. `wide`: decodes and 5-node chains at 16 sequences too.
"""
import sys, time, statistics as st
from dataclasses import replace
from pathlib import Path
import torch, yaml
sys.path.insert(0, str(Path(__file__).resolve().parents[4]))
torch.set_num_threads(1)
from engine.model import Model
from validation.probes import EW_SPEC
from validation.steptime import point_call, work_of, eagle_tree
from validation.timing import interleaved_times
from sim.cost import ForwardCost
from sim.hardware import hardware_from_node
from sim.specio import Node
import sim.trees as T
DEEP = 6
CTX = 128
args = [a for a in sys.argv[2:] if a != "wide"]
prof = Path(args[0] if args else str(Path(__file__).resolve().parents[1] / "0.35.0" / "compare-family-schemes" / "measured-hardware.yaml"))
hw0 = hardware_from_node(Node(yaml.safe_load(prof.read_text()), None, "hardware"), prof.parent)
hw = hw0.for_weights(replace(EW_SPEC, layers=DEEP, vocab=4096).weight_bytes)
configs = [("decode", 1, ()), ("decode", 4, ()), ("chain2", 1, T.chain(2)), ("chain2", 4, T.chain(2)),
           ("chain5", 4, T.chain(5)), ("tree16", 1, eagle_tree(16)), ("tree16", 4, eagle_tree(16))]
if "wide" in sys.argv[2:]:
    configs += [("decode", 16, ()), ("chain5", 16, T.chain(5))]
models = {L: Model.random(replace(EW_SPEC, layers=L, vocab=4096), seed=0, device="cpu", check_values=True, dtype=torch.float32)
          for L in (1, DEEP)}
fns, price = {}, {}
for name, B, tree in configs:
    p = {"kind": name, "batch": B, "context": CTX, "q": 1, "tree": tree}
    for L in (1, DEEP):
        fns[f"{name}b{B}L{L}"] = point_call(models[L], p, "cpu")
        price[f"{name}b{B}L{L}"] = float(ForwardCost(models[L].spec, hw)(work_of(p)).time)
def per_layer(t, name, B):
    return (t[f"{name}b{B}L{DEEP}"] - t[f"{name}b{B}L1"]) / (DEEP - 1)
rounds = []
end = time.time() + float(sys.argv[1])
while time.time() < end:
    rounds.append(interleaved_times(fns, "cpu", 5))
print(f"{len(rounds)} rounds of 5 interleaved calls, context {CTX}; per layer, us (median over rounds)")
for name, B, tree in configs:
    m = st.median(per_layer(t, name, B) for t in rounds) * 1e6
    pr = per_layer(price, name, B) * 1e6
    rows = B * (1 + len(tree))
    print(f"  {name:7} batch {B} ({rows:3} rows): measured {m:8.1f}  priced {pr:8.1f}  residual {m - pr:+8.1f}  ({(m - pr) / pr * 100:+.1f}%)")
