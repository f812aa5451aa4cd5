"""0.39.0's drafter_parts.py with 0.40.0's prices (2026-12-05): the layers' and LM head's products
at the reuse factors the drafter's passes pay (sim.drafters.PassPricer.scale, the profile's
gemm_reuse: 0.39.0's price_parts with `reused`), and the host work at the profile's fixed parts
and parts per sequence (sim.drafters.drafter_host_time). Run from the repository root with the
project's environment, alone (2 cores), right after a comparison that calibrated (its DIR):

  python validation/results/cpu-epyc-zen3/0.40.0/drafter_parts.py SECONDS DIR [LABEL,...] [CONCS]

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


if __name__ == "__main__":
    torch.set_num_threads(1)
    base.price_parts = partial(base.price_parts, reused=True)
    base.main(float(sys.argv[1]), Path(sys.argv[2]), (sys.argv[3] if len(sys.argv) > 3 else "mtp1,mtp2").split(","),
              [int(x) for x in (sys.argv[4] if len(sys.argv) > 4 else "1,4").split(",")])
