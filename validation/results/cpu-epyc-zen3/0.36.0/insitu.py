"""Do the warm matmul curves price the family target's products as they run inside its forward?
(2026-12-04, 0.36.0). Run from the repository root with the project's environment, alone (2 cores):

  python validation/results/cpu-epyc-zen3/0.36.0/insitu.py SECONDS
  python validation/results/cpu-epyc-zen3/0.36.0/insitu.py share SECONDS [LABEL [HIGH]]

The first form:

Cycle after cycle, in one process, so that every reading of a cycle sees the same spell of the host:
- in situ: `none` decoding in 4-request engine runs at concurrency 1 and 4, the target's matrix
  products (`@`) timed inside its decode forwards (0.35.0/host_regimes.py `parts`), per forward;
- probe: the calibration's warm probe (validation.probes.matmul_probes over a 16 MiB pool of one
  shape, validation.timing.steady_time after 5 ms of host work) for each of the target's shapes,
  at 1 and 4 rows, summed over a forward's products;
- model: the target's own matrices, as the forward met them, one pass over all of them (x @ W.T,
  the same views) timed steady after 5 ms of host work, at 1 and 4 rows; and modelN the same
  after N ms of host work (GAPS_MS).
Per cycle each reading's ratio to in situ; medians and quartiles over the cycles.

`share`: `none` (or LABEL) in the same pairs of runs (at 1 and HIGH, default 4, HIGH requests),
each run's median decode step at its full batch less drafting, and the target's forward within
it (its passes under 128 tokens, no prompt's prefill); per cycle the ratios at HIGH over at 1,
and each part's growth per added sequence in units of the step at 1.
"""
from __future__ import annotations

import importlib.util
import statistics as st
import sys
import time
from pathlib import Path

import numpy as np
import torch

GAPS_MS = (2, 10, 20)  # the model's own matrices after these gaps too
ROOT = Path(__file__).resolve().parents[4]
HERE = Path(__file__).resolve().parent
spec = importlib.util.spec_from_file_location("host_regimes", HERE.parent / "0.35.0" / "host_regimes.py")
hr = importlib.util.module_from_spec(spec)
spec.loader.exec_module(hr)


def cycles(seconds: float, once) -> list:
    """once()'s results, called again and again until `seconds` have passed."""
    out = []
    end = time.time() + seconds
    while time.time() < end:
        out.append(once())
    return out


def time_products(model, below: int = 64):
    """Time the matrix products (`@`) inside `model`'s forwards of fewer than `below` tokens (the
    decode forwards: 64): returns
    (state, recs, the untimed `@`): recs gets (sequences, seconds of products) a forward, and
    while state["record"] is a list, each product's weight is appended to it; while state["each"]
    is a list, each product's (rows, seconds) (0.39.0's walk.py)."""
    import engine.model as em
    clock = time.perf_counter
    state = {"on": False, "t": 0.0, "record": None, "each": None}
    inner = torch.Tensor.__matmul__

    def matmul(a, b):
        if not state["on"]:
            return inner(a, b)
        if state["record"] is not None:
            state["record"].append(b)
        t0 = clock()
        r = inner(a, b)
        dt = clock() - t0
        state["t"] += dt
        if state["each"] is not None:
            state["each"].append((a.shape[0], dt))
        return r

    torch.Tensor.__matmul__ = matmul
    forward = em.Model.forward
    recs: list[tuple[int, float]] = []

    def timed_forward(self, step, cache, inputs=None):
        if self is not model or step.num_tokens >= below:
            return forward(self, step, cache, inputs)
        state["on"], state["t"] = True, 0.0
        try:
            return forward(self, step, cache, inputs)
        finally:
            state["on"] = False
            recs.append((int(step.kv_lens.numel()), state["t"]))

    em.Model.forward = timed_forward
    return state, recs, inner


def forward_matrices(state, trace, scheme, model, drafters, prompts) -> list:
    """The target's matrices (W.T, as `@` meets them) in the order its first decode forward uses
    them: recorded over one run at concurrency 1 (`state` from time_products) until a matrix comes
    back."""
    state["record"] = []
    hr.run_at(trace, scheme, 1, model, drafters, prompts)
    first, seen = [], set()
    for b in state["record"]:
        if b.data_ptr() in seen:
            break
        seen.add(b.data_ptr())
        first.append(b)
    state["record"] = None
    return first


def main(seconds: float) -> None:
    from validation.probes import matmul_probes
    from validation.timing import host_gap, steady_time
    trace, model, drafters, prompts = hr.family(["none"])
    scheme = trace.speculation[0]
    state, recs, inner = time_products(model)
    mats = forward_matrices(state, trace, scheme, model, drafters, prompts)
    shapes = sorted({(m.shape[0], m.shape[1]) for m in mats})  # (k, n) of x @ W.T: W.T is (k, n)
    print(f"the target's forward: {len(mats)} products, shapes (k, n) {shapes}, "
          f"{sum(m.numel() for m in mats) * 4 / 2**20:.1f} MiB")
    gap = host_gap(0.005)
    gaps = {ms: host_gap(ms / 1e3) for ms in GAPS_MS}
    probes = matmul_probes("cpu", shapes, [1, 4], pool_bytes=16 << 20)
    counts = {s: sum(1 for m in mats if (m.shape[0], m.shape[1]) == s) for s in shapes}
    xs = {(k, r): torch.randn(r, k) for k, _ in shapes for r in (1, 4)}

    def own(r):
        return lambda: [inner(xs[(w.shape[0], r)], w) for w in mats]

    def once() -> dict:
        cyc = {}
        for conc in (1, 4):
            recs.clear()
            hr.run_at(trace, scheme, conc, model, drafters, prompts)
            cyc[("insitu", conc)] = st.median(t for s, t in recs if s == conc)
        for r in (1, 4):
            total = 0.0
            for (k, n) in shapes:
                fn, flops = probes[(k * n * 4 // 1024, r)]
                per = steady_time(fn, "cpu", between=gap) / (flops / (2 * r * k * n))
                total += per * counts[(k, n)]
            cyc[("probe", r)] = total
            cyc[("model", r)] = steady_time(own(r), "cpu", between=gap)
            for ms, g in gaps.items():
                cyc[(f"model{ms}", r)] = steady_time(own(r), "cpu", between=g)
        print("  cycle: " + ", ".join(f"{a} {b} {v * 1e3:.2f}" for (a, b), v in cyc.items()), flush=True)
        return cyc

    runs = cycles(seconds, once)
    print(f"{len(runs)} cycles, {seconds:.0f} s; ms a forward's products, median (quartiles) over cycles")
    for name in ("insitu", "probe", "model", *(f"model{ms}" for ms in GAPS_MS)):
        for r in (1, 4):
            v = [c[(name, r)] * 1e3 for c in runs]
            q = np.quantile(v, [0.25, 0.75])
            line = f"  {name:7} {r} rows {st.median(v):6.3f} ({q[0]:.3f}-{q[1]:.3f})"
            if name != "insitu":
                ratio = [c[(name, r)] / c[("insitu", r)] for c in runs]
                qr = np.quantile(ratio, [0.25, 0.75])
                line += f"   over in situ {st.median(ratio):.3f} ({qr[0]:.3f}-{qr[1]:.3f})"
            print(line)
        g = [(c[(name, 4)] - c[(name, 1)]) / 3 * 1e3 for c in runs]
        print(f"  {name:7} per added row {st.median(g):6.3f} ms")



def share(seconds: float, label: str, hi: int = 4) -> None:
    import engine.model as em
    trace, model, drafters, prompts = hr.family([label], requests=hi)
    forwards: list[tuple[int, float]] = []  # (sequences, seconds) of the target's decode forwards
    inner = em.Model.forward

    def timed(self, step, cache, inputs=None):
        t0 = time.perf_counter()
        out = inner(self, step, cache, inputs)
        if self is model and step.num_tokens < 128:  # not a 128-token prompt's prefill
            forwards.append((int(step.kv_lens.numel()), time.perf_counter() - t0))
        return out

    em.Model.forward = timed
    def once() -> dict:
        out = {}
        for c in (1, hi):
            forwards.clear()
            steps, drafting = hr.run_at(trace, trace.speculation[0], c, model, drafters, prompts)
            out[c] = (st.median(s - d for s, d in zip(steps, drafting)), st.median(t for n, t in forwards if n == c))
        return out

    runs = cycles(seconds, once)

    def r(f):
        return st.median(f(c) for c in runs)
    print(f"{len(runs)} cycles; b1 step-drafting {r(lambda c: c[1][0]) * 1e3:.2f} ms, target forward "
          f"{r(lambda c: c[1][1]) * 1e3:.2f}; at {hi} {r(lambda c: c[hi][0]) * 1e3:.2f}, {r(lambda c: c[hi][1]) * 1e3:.2f}")
    print(f"ratios at {hi} over at 1: step-drafting {r(lambda c: c[hi][0] / c[1][0]):.3f} forward {r(lambda c: c[hi][1] / c[1][1]):.3f} "
          f"non-forward {r(lambda c: (c[hi][0] - c[hi][1]) / (c[1][0] - c[1][1])):.3f}")
    print(f"per added seq in units of the step at 1: forward {r(lambda c: (c[hi][1] - c[1][1]) / (hi - 1) / c[1][0]):.3f} "
          f"non-forward {r(lambda c: ((c[hi][0] - c[hi][1]) - (c[1][0] - c[1][1])) / (hi - 1) / c[1][0]):.3f}")


if __name__ == "__main__":
    torch.set_num_threads(1)
    sys.path.insert(0, str(ROOT))
    if sys.argv[1] == "share":
        share(float(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else "none", int(sys.argv[4]) if len(sys.argv) > 4 else 4)
    else:
        main(float(sys.argv[1]))
