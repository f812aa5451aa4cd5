"""Where inside a forward do the warm probes price the family target's products short? (2026-12-05,
0.39.0). Run from the repository root with the project's environment, alone (2 cores):

  python validation/results/cpu-epyc-zen3/0.39.0/walk.py SECONDS LABEL CONCURRENCY

Cycle after cycle in one process (as 0.38.0/swing.py): the family's scheme LABEL in a
CONCURRENCY-request engine run at that concurrency, each of the target's matrix products (`@`)
timed inside its forwards at the full batch whose rows by place are the commonest such forward's
(a decode, or a verification: its median over the run's such forwards); then, at those rows:
- probe: the calibration's warm shape probes (a 16 MiB pool of one shape, steady after 5 ms of host
  work; shrunk above 16 rows as calibrate's), summed over the forward's products, as swing.py;
- walk: the target's own matrices in the forward's order, one pass over all of them, each product
  timed, passes until steady (validation.timing.steady_time's rule) with 5 ms of host work before
  each pass;
- walk-step: the same with host work before each pass as long as the engine's median step (drafting
  out) less the walk's products (the weights wait a step between their uses).
Prints each reading's median over cycles, its ratio to in situ, and the ratio by place.
"""
from __future__ import annotations

import statistics as st
import sys
import time
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "0.35.0"))
from host_regimes import family, run_at  # noqa: E402

sys.path.insert(0, str(HERE.parent / "0.36.0"))
import insitu as in_situ  # noqa: E402


def walk_times(pairs, inner, gap, before=None, tol: float = 0.03, least: int = 6, most: int = 12) -> list[float]:
    """Each product's seconds in a steady pass over `pairs` ((x, W.T) each, `inner(x, W.T)`;
    steady_time's rule on the pass's total), `gap` before each pass and `before` (untimed, if
    given) before each product: the mean of the last two passes, by place."""
    passes: list[list[float]] = []
    clock = time.perf_counter
    while len(passes) < most:
        gap()
        each = []
        for x, w in pairs:
            if before is not None:
                before()
            t0 = clock()
            inner(x, w)
            each.append(clock() - t0)
        passes.append(each)
        if len(passes) >= least and sum(passes[-1]) >= (1.0 - tol) * sum(passes[-2]):
            break
    return [(a + b) / 2 for a, b in zip(passes[-1], passes[-2])]


def full_batch_forwards(each: list, recs: list, n: int, conc: int) -> list[list[tuple[int, float]]]:
    """time_products' records of one run cut into forwards of `n` products ((rows, seconds) each),
    those at the full batch `conc` kept."""
    assert len(each) == n * len(recs), (len(each), len(recs))
    return [each[i * n:(i + 1) * n] for i, (s, _) in enumerate(recs) if s == conc]


def rows_of(forward) -> tuple[int, ...]:
    """A forward's rows by place: its signature."""
    return tuple(r for r, _ in forward)


class InSitu:
    """LABEL's scheme on the family at CONC, the target's products timed by place inside its
    forwards (insitu.time_products), and the forward's own matrices (insitu.forward_matrices)."""

    def __init__(self, label: str, conc: int):
        self.trace, self.model, self.drafters, self.prompts = family([label], requests=conc)
        self.scheme, self.conc = self.trace.speculation[0], conc
        self.state, self.recs, self.inner = in_situ.time_products(self.model, below=1 << 30)
        self.mats = in_situ.forward_matrices(self.state, self.trace, self.scheme, self.model, self.drafters, self.prompts)
        self.sig = None  # the commonest forward at the full batch: its rows by place (the first run's)

    def run(self):
        """One engine run: (the products' median seconds by place over its full-batch forwards of
        the commonest signature (places,), run_at's (steps, drafting), the signatures of all its
        full-batch forwards)."""
        self.recs.clear()
        self.state["each"] = []
        timing = run_at(self.trace, self.scheme, self.conc, self.model, self.drafters, self.prompts)
        each, self.state["each"] = self.state["each"], None
        fwd = full_batch_forwards(each, self.recs, len(self.mats), self.conc)
        sigs = [rows_of(f) for f in fwd]
        if self.sig is None:
            self.sig = max(set(sigs), key=sigs.count)
        same = [f for f in fwd if rows_of(f) == self.sig]
        return np.median(np.array([[t for _, t in f] for f in same]), axis=0), timing, sigs


def main(seconds: float, label: str, conc: int) -> None:
    from validation.probes import matmul_probes
    from validation.timing import host_gap, steady_time
    setup = InSitu(label, conc)
    mats, inner, n = setup.mats, setup.inner, len(setup.mats)
    gap = host_gap(0.005)
    probes, runs = None, []
    end = time.time() + seconds
    while time.time() < end:
        insitu, (steps, drafting), sigs = setup.run()
        sig = setup.sig
        if probes is None:
            xs = {(m.shape[0], r): torch.randn(r, m.shape[0]) for m, r in zip(mats, sig)}  # x (rows, k) @ W.T (k, n)
            keys = sorted({(m.shape[0], m.shape[1], r) for m, r in zip(mats, sig)})
            counts = {key: sum(1 for m, r in zip(mats, sig) if (m.shape[0], m.shape[1], r) == key) for key in keys}
            probes = {(k, n_, r): matmul_probes("cpu", [(k, n_)], [r], pool_bytes=16 << 20, shrink=True)[(k * n_ * 4 // 1024, r)]
                      for k, n_, r in keys}
            print(f"{label} at {conc}: the target's forward has {n} products; W.T (k, n) and rows by place "
                  f"{[(*m.shape, r) for m, r in zip(mats, sig)]}; {sigs.count(sig)} of {len(sigs)} forwards", flush=True)
        step = st.median(s - d for s, d in zip(steps, drafting))
        probe = sum(steady_time(fn, "cpu", between=gap) / (flops / (2 * r * k * n_)) * counts[(k, n_, r)]
                    for (k, n_, r), (fn, flops) in probes.items())
        walk_mats = [(xs[(m.shape[0], r)], m) for m, r in zip(mats, sig)]
        walk = np.array(walk_times(walk_mats, inner, gap))
        walk_step = np.array(walk_times(walk_mats, inner, host_gap(max(0.0, step - walk.sum()))))
        runs.append({"insitu": insitu, "probe": probe, "walk": walk, "walk-step": walk_step, "step": step})
        print(f"  cycle {len(runs)}: in situ {insitu.sum() * 1e3:.3f} ms, probe {probe * 1e3:.3f}, walk {walk.sum() * 1e3:.3f}, "
              f"walk-step {walk_step.sum() * 1e3:.3f}, step less drafting {step * 1e3:.2f} ms", flush=True)
    print(f"{len(runs)} cycles, {seconds:.0f} s; a forward's products: median ms, and over in situ median (quartiles) over cycles")
    base = np.array([r["insitu"].sum() for r in runs])
    for name in ("insitu", "probe", "walk", "walk-step", "step"):
        v = np.array([float(np.sum(r[name])) for r in runs])
        ratio = v / base
        q = np.quantile(ratio, [0.25, 0.75])
        print(f"  {name:9} {np.median(v) * 1e3:7.3f}   {np.median(ratio):.3f} ({q[0]:.3f}-{q[1]:.3f})")
    ins = np.median(np.array([r["insitu"] for r in runs]), axis=0)
    for name in ("walk", "walk-step"):
        by = np.median(np.array([r[name] / r["insitu"] for r in runs]), axis=0)
        print(f"  {name} over in situ by place (in situ us): " + ", ".join(
            f"{p}:{b:.2f}({i * 1e6:.0f})" for p, (b, i) in enumerate(zip(by, ins))))


if __name__ == "__main__":
    torch.set_num_threads(1)
    main(float(sys.argv[1]), sys.argv[2], int(sys.argv[3]))
