"""The drafters' host work in a decode step as the calibration's drafter host probe measures it
(validation.drafter_host: each step's drafting less its drafter forward calls and input
projections), on the probe's 1-layer hidden-64 model amid the family's memory traffic ("probe")
against the same probe on random weights of the family's own shape, no traffic ("family"), after
16-, 128- and 512-token prompts, for one MTP module and EAGLE chains of 1 and 5, at 1 and 16
sequences (2026-12-05, 0.43.0). The first decode step (where the drafter catches up on the whole
prompt) is printed apart from the rest's mean and median. Run from the repository root with the
project's environment, alone (2 cores):

  python validation/results/cpu-epyc-zen3/0.43.0/host_shape.py
"""
from __future__ import annotations

import statistics

import torch

from sim.models import model_from_node
from sim.specio import Node
from validation.host_probes import _decode_steps, checkpoint_of
from validation.traffic import Traffic

torch.set_num_threads(1)
fam = model_from_node(Node("tiny", "command line", "model"), None)
ck = checkpoint_of(fam)
tr = Traffic.of(fam)
for rnd in range(2):
    for name, kw in (("probe", dict(traffic=tr)), ("family", dict(checkpoint=ck))):
        for prompt in (16, 128, 512):
            for entry in ({"scheme": "mtp", "depth": 1}, {"scheme": "eagle", "depth": 1}, {"scheme": "eagle", "depth": 5}):
                out = []
                for b in (1, 16):
                    cols = _decode_steps(b, "cpu", entry, 24, prompt=prompt, passes=True, **kw)
                    h = cols["draft_time"] - cols["draft_pass_time"]
                    out.append(f"b{b} first {h[0]*1e6:6.0f} rest-mean {statistics.mean(h[1:])*1e6:6.0f} "
                               f"med {statistics.median(h[1:])*1e6:6.0f}")
                print(rnd, name, prompt, entry["scheme"], entry["depth"], " | ".join(out), flush=True)
