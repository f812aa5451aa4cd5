"""A model drafter's forward passes one by one (2026-12-08, 0.57.1): the engine's time of each
pass of a step's drafting (its drafter model's forward call, attention and all) against the
simulator's price of that pass alone (sim.drafters.PassPricer.direct over the step's passes up
to it less over those before it, the host work and input projection left out: what the cost
model charges for the forward), under the profile a comparison measured. Run from the
repository root with the project's environment, alone (2 cores):

  python validation/results/cpu-epyc-zen3/0.57.1/drafter_passes.py SECONDS DIR LABEL CONCS

Cycle after cycle, an engine run of LABEL of traces/family-schemes.yaml at each concurrency of
CONCS (as many requests as the largest); per concurrency, over the ordinary full-batch steps
(no prefill in or right before them), per pass index: the median engine and priced ms, their
ratio, and the pass's median shape (query rows, LM-head rows, sequences with several rows)."""
from __future__ import annotations

import importlib.util
import statistics as st
import sys
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve()
_spec = importlib.util.spec_from_file_location("drafter_parts_039", HERE.parents[1] / "0.39.0" / "drafter_parts.py")
base = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(base)


def pass_prices(trace, label: str, passes: list[tuple[int, int, int, int]], n: int) -> list[float]:
    """Each pass's forward as the simulator prices it (host work and input projection apart)."""
    from sim.drafters import drafter_host_time, fused_input_cost
    scheme = next(s for s in trace.speculation if s.label == label)
    spec, fuse = scheme.drafter_spec()
    pr = scheme.pass_pricer(trace)
    ctx = max(0, passes[0][3] - n)
    shapes = [p[:3] for p in passes]

    def fwd(k: int) -> float:
        if not k:
            return 0.0
        host = drafter_host_time(pr.hw, n, [p[0] for p in shapes[:k]], scheme.tree_levels, scheme.catch_up)
        inputs = sum(fused_input_cost(spec, pr.hw, trace.tp, p[0]).time for p in shapes[:k]) if fuse else 0.0
        return pr.direct(n, ctx, shapes[:k]).time - host - inputs
    return [fwd(j + 1) - fwd(j) for j in range(len(passes))]


def main(seconds: float, root: Path, label: str, concs: list[int]) -> None:
    import engine.model as em
    from engine.runner import run_scheme
    from sim.workload import make_requests
    from validation.draft_kinds import step_kinds
    trace, model, drafters, prompts = base.family([label], requests=max(4, *concs))
    priced = base.profile_trace(root.resolve())
    scheme = trace.speculation[0]
    steps: list[dict] = []
    cur: list = []
    forward = em.Model.forward

    def timed_forward(self, step, cache, inputs=None):
        starts = list(step.row_start) + [step.num_tokens]
        rows = [b - a for a, b in zip(starts, starts[1:])]
        if self is model:
            steps.append({"n": len(rows), "prefill": max(rows) >= 64, "passes": list(cur)})
            cur.clear()
            return forward(self, step, cache, inputs)
        t0 = time.perf_counter()
        try:
            return forward(self, step, cache, inputs)
        finally:
            cur.append((step.num_tokens, int(step.logit_rows.numel()), sum(1 for r in rows if r > 1),
                        int(step.kv_lens.sum()), time.perf_counter() - t0, len(rows)))
    em.Model.forward = timed_forward
    kept: dict[int, list] = {c: [] for c in concs}
    end, cycles = time.time() + seconds, 0
    while time.time() < end:
        for c in concs:
            steps.clear()
            wl = replace(trace.workload, arrival=replace(trace.workload.arrival, concurrency=c))
            run_scheme(trace, scheme, make_requests(wl, trace.seed), model, prompts=prompts, drafters=drafters)
            admitted = step_kinds(np.array([s["prefill"] for s in steps]))
            kept[c] += [s for s, adm in zip(steps, admitted) if not adm and s["passes"] and s["passes"][0][5] == c]
        cycles += 1
    print(f"# {cycles} cycles, {seconds:.0f} s; `{label}`; profile {root}/measured-hardware.yaml")
    for c in concs:
        by_pass: dict[int, dict] = {}
        for s in kept[c]:
            prices = pass_prices(priced, label, s["passes"], c)
            for j, (p, price) in enumerate(zip(s["passes"], prices)):
                d = by_pass.setdefault(j, {"e": [], "p": [], "shape": Counter()})
                d["e"].append(p[4])
                d["p"].append(price)
                d["shape"][p[:3]] += 1
        tot_e = tot_p = 0.0
        for j, d in sorted(by_pass.items()):
            e, p = st.median(d["e"]) * 1e3, st.median(d["p"]) * 1e3
            tot_e, tot_p = tot_e + e, tot_p + p
            print(f"concurrency {c:2} pass {j}: engine {e:6.3f} priced {p:6.3f} ({p / e:.3f}); {len(d['e'])} passes, "
                  f"shape (rows, lm rows, several) {d['shape'].most_common(1)[0][0]}")
        print(f"concurrency {c:2} the passes' medians summed: engine {tot_e:.3f} priced {tot_p:.3f} ({tot_p / tot_e:.3f})")


if __name__ == "__main__":
    torch.set_num_threads(1)
    main(float(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], [int(x) for x in sys.argv[4].split(",")])
