"""0.40.0's drafter_parts.py with 0.43.0's prices (2026-12-05): the `host` part adds what
sim.schemes.eagle2.Eagle2.drafter adds to the passes' price, hardware.draft_cand_s for every
candidate the drafter scores (n x Eagle2.candidates(depth), depth the step's passes), so that
EAGLE-2's drafting can be read part by part as the others are; and `inputs` is priced by
sim.drafters.fused_input_cost (where the profile has draft_input_us, the measured rest in place
of the product's launch). Run
from the repository root with the project's environment, alone (2 cores), after a comparison
that calibrated (its DIR):

  python validation/results/cpu-epyc-zen3/0.43.0/drafter_parts.py SECONDS DIR [LABEL,...] [CONCS]

The engine's side and the table are 0.39.0's (see its docstring).
"""
from __future__ import annotations

import importlib.util
import sys
from functools import partial
from pathlib import Path

import torch

_spec = importlib.util.spec_from_file_location("drafter_parts_039", Path(__file__).resolve().parents[1] / "0.39.0" / "drafter_parts.py")
base = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(base)


def price_parts(trace, label, passes, n, _price=partial(base.price_parts, reused=True)):
    from sim.drafters import fused_input_cost
    out = _price(trace, label, passes, n)
    scheme = next(s for s in trace.speculation if s.label == label)
    spec, fuse = scheme.drafter_spec()
    if fuse:
        out["inputs"] = sum(fused_input_cost(spec, trace.hardware.drafter(), trace.tp, p[0]).time for p in passes)
    if getattr(scheme, "dynamic", False):
        out["host"] += trace.hardware.drafter().draft_cand_s * n * scheme.candidates(len(passes))
    return out


if __name__ == "__main__":
    torch.set_num_threads(1)
    base.price_parts = price_parts
    base.main(float(sys.argv[1]), Path(sys.argv[2]), (sys.argv[3] if len(sys.argv) > 3 else "eagle2").split(","),
              [int(x) for x in (sys.argv[4] if len(sys.argv) > 4 else "1,4").split(",")])
