"""The drafters' host work as the calibration measures it (validation.drafter_host) on the 1-layer
hidden-64 probe model amid the family's memory traffic, against the same probe run on random
weights of the family's own shape (no traffic: its passes are the family's), after 16- and
128-token prompts (2026-12-05, 0.43.0). Rounds alternate the three, so a change of the host's
speed falls on all. Run from the repository root with the project's environment, alone:

  python validation/results/cpu-epyc-zen3/0.43.0/host_shape.py ROUNDS
"""
from __future__ import annotations

import statistics
import sys

import torch

from sim.models import model_from_node
from sim.specio import Node
from validation.drafter_host import drafter_host_figures, drafter_host_probe
from validation.host_probes import checkpoint_of
from validation.traffic import Traffic

torch.set_num_threads(1)
family = model_from_node(Node("tiny", "command line", "model"), None)
traffic = Traffic.of(family)
setups = {"probe+traffic p16": lambda: drafter_host_probe("cpu", traffic),
          "family p16": lambda: drafter_host_probe("cpu", None, checkpoint_of(family), 16),
          "family p128": lambda: drafter_host_probe("cpu", None, checkpoint_of(family), 128)}
got = {k: [] for k in setups}
for r in range(int(sys.argv[1]) if len(sys.argv) > 1 else 3):
    for k, fn in setups.items():
        got[k].append(fn())
keys = list(got["family p16"][0])
print("probe times (us, median over rounds):")
print(f"{'':18}" + "".join(f"{k:>14}" for k in keys))
for k, runs in got.items():
    print(f"{k:18}" + "".join(f"{statistics.median(r[x] for r in runs) * 1e6:14.1f}" for x in keys))
print("figures (us):")
for k, runs in got.items():
    med = {x: statistics.median(r[x] for r in runs) for x in keys}
    print(f"{k:18} " + "  ".join(f"{f} {v * 1e6:.2f}" for f, v in drafter_host_figures(med).items()))
