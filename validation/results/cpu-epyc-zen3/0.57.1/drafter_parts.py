"""0.39.0's drafter_parts.py priced by 0.57.1's cost model (2026-12-08): each recorded step's
drafting passes through sim.drafters.PassPricer.direct, as the simulator prices them, split into
the products of the layers (`mm`) and LM head (`lm`), the picks over the LM-head rows (`pick`,
draft_logit_s a logit element: the engine's pick and top-k together), the input projection
(`inputs`, sim.drafters.fused_input_cost), the host work (sim.drafters.drafter_host_time) and
the rest of the forwards (`fwd-rest`: the whole price less those). Run from the repository root
with the project's environment, alone (2 cores), with a comparison's DIR (its profile and
simulator trace):

  python validation/results/cpu-epyc-zen3/0.57.1/drafter_parts.py SECONDS DIR [LABEL,...] [CONCS]

The engine's side and the table are 0.39.0's (see its docstring): cycle after cycle, engine runs
of each LABEL at each concurrency of CONCS (as many requests as the largest), medians over the
ordinary full-batch steps.
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
    """The simulator's price of one step's drafting passes ((query rows, LM-head rows, sequences
    with several rows, Σ context of the pass) each) by the parts base.ENGINE names."""
    from sim.drafters import drafter_host_time, fused_input_cost
    scheme = next(s for s in trace.speculation if s.label == label)
    spec, fuse = scheme.drafter_spec()
    pr = scheme.pass_pricer(trace)
    fwd = pr.fwd
    out = dict.fromkeys(base.ENGINE, 0.0)
    for j, (tok, lm, _several, _ctx) in enumerate(passes):
        sc = pr.scale(j, tok, lm)
        out["mm"] += fwd.dense * fwd._compute(fwd.dense_flops_per_tok * tok, tok, "dense") * sc[0]
        out["lm"] += fwd._compute(fwd.lm_flops_per_tok * lm, lm, "lm") * sc[1]
        out["pick"] += fwd.logit_pass * lm
        if fuse:
            out["inputs"] += fused_input_cost(spec, pr.hw, trace.tp, tok).time
    out["host"] = drafter_host_time(pr.hw, n, [p[0] for p in passes], scheme.tree_levels, scheme.catch_up)
    whole = pr.direct(n, max(0, passes[0][3] - n), [p[:3] for p in passes]).time
    out["fwd-rest"] = whole - sum(out.values())
    return out


def run(argv: list[str]) -> None:
    """SECONDS DIR [LABEL,...] [CONCS] (defaults eagle; 4,16)."""
    labels = (argv[2] if len(argv) > 2 else "eagle").split(",")
    concs = [int(x) for x in (argv[3] if len(argv) > 3 else "4,16").split(",")]
    base.price_parts = price_parts
    base.main(float(argv[0]), Path(argv[1]), labels, concs)


if __name__ == "__main__":
    torch.set_num_threads(1)
    run(sys.argv[1:])
