"""Is the in-situ probe's round-to-round spread (reuse_spread.txt) the host's, or the build's?
Alternates, round by round, EAGLE-chain runs (the in-situ probe's, 1 sequence, the family's shape,
128-token prompts) of two engines built once (A, B: each its own random weights, kept for every
round) and of an engine built afresh each round (as insitu_probe does), and prints each run's
median later-pass LM head and first-pass LM head (us a step).

python validation/results/cpu-epyc-zen4/0.56.0/build_vs_host.py ROUNDS ROWS"""
import statistics
import sys

import torch

from engine.host_memory import retain_freed_memory
from engine.runner import run_scheme
from validation.host_probes import checkpoint_of, probe_engine
from validation.reuse import INSITU_DEPTH, REUSE_SKIP, ProductClock, step_parts
from sim.models import model_from_node
from sim.specio import Node
from pathlib import Path

torch.set_num_threads(1)
retain_freed_memory()
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 10
r = int(sys.argv[2]) if len(sys.argv) > 2 else 1
spec = model_from_node(Node("tiny", "script", "model"), Path("."))
entry = {"scheme": "eagle", "depth": INSITU_DEPTH}
tokens = REUSE_SKIP + 20 + INSITU_DEPTH + 2


def build():
    trace, target, drafters, requests = probe_engine(r, "cpu", entry, tokens, 128, checkpoint_of(spec))
    return trace, target, drafters, requests, ProductClock(target, drafters.eagle)


def run(b):
    trace, target, drafters, requests, clock = b
    clock.steps, clock.cur, clock.where = [], None, None
    with clock:
        run_scheme(trace, trace.speculation[0], requests, target, drafters=drafters)
    got = step_parts(clock.steps, r, INSITU_DEPTH)
    return {k: statistics.median(v) * 1e6 for k, v in got.items() if k in ("first", "later_layer", "later_lm")}


a, b = build(), build()
run(a), run(b)
rows = {"A": [], "B": [], "fresh": []}
for i in range(rounds):
    for name in ("A", "B", "fresh"):
        got = run(a if name == "A" else b if name == "B" else build())
        rows[name].append(got)
    print(f"round {i + 1}: " + " | ".join(f"{n} first {v[-1]['first']:.0f} layer {v[-1]['later_layer']:.0f} lm {v[-1]['later_lm']:.0f}"
                                        for n, v in rows.items()), flush=True)
for name, v in rows.items():
    for part in ("first", "later_layer", "later_lm"):
        xs = [x[part] for x in v]
        print(f"{name} {part}: median {statistics.median(xs):.0f} us, range {min(xs):.0f}-{max(xs):.0f}, "
              f"cv {statistics.stdev(xs) / statistics.mean(xs):.3f}")
