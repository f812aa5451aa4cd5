"""0.39.0's drafter_parts.py with 0.40.0's prices (2026-12-05): the layers' and LM head's products
at the reuse factors the drafter's passes pay (sim.drafters.PassPricer.scale, the profile's
gemm_reuse), and the host work at the profile's fixed parts and parts per sequence
(sim.drafters.drafter_host_time). Run from the repository root with the project's environment,
alone (2 cores), right after a comparison that calibrated (its DIR):

  python validation/results/cpu-epyc-zen3/0.40.0/drafter_parts.py SECONDS DIR [LABEL,...] [CONCS]

The engine's side and the table are 0.39.0's (see its docstring).
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import torch

_spec = importlib.util.spec_from_file_location("drafter_parts_039", Path(__file__).resolve().parents[1] / "0.39.0" / "drafter_parts.py")
base = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(base)


def price_parts(trace, label: str, passes: list[tuple[int, int, int, int]], n: int) -> dict:
    """0.39.0's price_parts through the drafter the scheme builds (its flags for weights used
    again), each pass's products at its reuse factors."""
    from sim.cost import Work
    from sim.drafters import PassPricer, drafter_host_time, linear_cost
    scheme = next(s for s in trace.speculation if s.label == label)
    spec, fuse = scheme.drafter_spec()
    pr = PassPricer(spec, trace.hardware.drafter(), trace.tp, fuse_input=fuse, tree_levels=scheme.tree_levels,
                    catch_up=scheme.catch_up, shared_lm=scheme.shared_lm, layers_again=scheme.layers_again)
    fwd = pr.fwd
    out = dict.fromkeys(base.ENGINE, 0.0)
    for j, (tok, lm, several, ctx) in enumerate(passes):
        sc = pr.scale(j, tok, lm)
        mm = fwd.dense * fwd._compute(fwd.dense_flops_per_tok * tok, tok, "dense") * sc[0]
        head = fwd._compute(fwd.lm_flops_per_tok * lm, lm, "lm") * sc[1]
        whole = fwd(Work(tok, n, ctx * max(1, tok // max(n, 1)), ctx, lm, **pr.paths(j, n, tok, several, ctx - (j + 1) * n)),
                    sc).time
        logits = fwd.logit_pass * lm
        out["mm"] += mm
        out["lm"] += head
        out["fwd-rest"] += whole - mm - head - logits
        out["pick"] += logits  # pick and top-k together: the LM-head rows' draft_logit_s
        if fuse:
            out["inputs"] += linear_cost(2 * spec.hidden, spec.hidden, tok, spec, pr.hw, trace.tp).time
    out["host"] = drafter_host_time(pr.hw, n, [p[0] for p in passes], scheme.tree_levels, scheme.catch_up)
    return out


if __name__ == "__main__":
    torch.set_num_threads(1)
    base.price_parts = price_parts
    base.main(float(sys.argv[1]), Path(sys.argv[2]), (sys.argv[3] if len(sys.argv) > 3 else "mtp1,mtp2").split(","),
              [int(x) for x in (sys.argv[4] if len(sys.argv) > 4 else "1,4").split(",")])
