"""Fit the free parameter of an acceptance model so it reproduces a published tau.

    python -m validation.fit_profiles

Prints, for each published figure the profiles in traces/acceptance/ cite, the solved parameter
and the tau the fitted model gives. The profile files store the solved numbers; the test
tests/test_profiles.py checks each profile still reproduces its `published.mean_accepted`.
"""
from __future__ import annotations

import math

from sim import trees as T
from sim.acceptance import RankDepth
from sim.dyntree import Confidence, TreeLibrary


def solve(f, lo: float, hi: float, target: float, xtol: float = 1e-7, ftol: float = 0.0,
           iters: int = 60, f_lo: float | None = None, f_hi: float | None = None) -> float:
    """x in [lo, hi] with f(x) = target for increasing f: to within `xtol` of x, or where f is
    within `ftol` of the target, or after `iters` calls. The Illinois form of false position: it
    keeps the root bracketed as bisection does, but a smooth f takes a handful of calls where
    bisection took 20 (EAGLE-2's confidence fit grows 512 trees a call: 0.3-0.6 s on this CPU).
    A target beyond f's range gives the nearer end. `f_lo`, `f_hi`: f at the ends, where the
    caller has them (each is a call of f saved)."""
    f_lo = (f(lo) if f_lo is None else f_lo) - target
    f_hi = (f(hi) if f_hi is None else f_hi) - target
    if f_lo >= 0:
        return lo
    if f_hi <= 0:
        return hi
    kept = 0  # which end the last two steps both moved: -1 lo, +1 hi
    for _ in range(iters):
        if hi - lo <= xtol:
            break
        x = hi - f_hi * (hi - lo) / (f_hi - f_lo)
        x = min(max(x, lo + xtol / 4), hi - xtol / 4)  # strictly inside, or the bracket stalls
        fx = f(x) - target
        if abs(fx) <= ftol:
            return x
        if fx < 0:
            lo, f_lo = x, fx
            if kept == -1:
                f_hi /= 2  # lo moved twice running: pull the next point toward hi
            kept = -1
        else:
            hi, f_hi = x, fx
            if kept == 1:
                f_lo /= 2
            kept = 1
    return (lo + hi) / 2


# how near a fit's tau must come to the measured one, in tokens per step. The model's tau is a
# mean over 512 seeded trees, and a tree's shape jumps as a parameter moves: about its linear
# trend near a fit, tau scatters by 0.015-0.022 tokens (sd; 13 points over 0.06 of top1_mean,
# depth 6, 60 tokens, top-k 8 and 10; 2026-12-04), and is not even monotone. Bisecting to 1e-6
# (20 calls of 0.6 s, EAGLE-2's fits took 214 s of a CPU comparison and cut a GPU one off) lands
# on one crossing of that scatter, no nearer the trend than any point within it: a tau within
# 0.02 is as good a fit. It is under half the measured tau's standard error over the family's
# runs (about 1,100 steps, sd near 1.5 tokens: 0.045).
TAU_TOL = 0.02


def confidence_tau(top1_mean: float, depth: int, topk: int, tree_tokens: int, size: int = 512, vocab: int = 0,
                   **kw) -> float:
    lib = TreeLibrary(Confidence(top1_mean=top1_mean, **kw), topk, tree_tokens, seed=0, size=size, vocab=vocab)
    return 1.0 + lib.expected(depth)


LEAST_TOP1 = 0.01  # the least top-1 mean a confidence fit takes (and the most: 1 - LEAST_TOP1)


def fit_confidence(tau: float, depth: int, topk: int, tree_tokens: int, at_least: float | None = None, **kw) -> float:
    """The top-1 mean at which the confidence model gives `tau` tokens per step; `at_least`: its
    tau at LEAST_TOP1, where the caller has it."""
    return solve(lambda m: confidence_tau(m, depth, topk, tree_tokens, **kw), LEAST_TOP1, 1 - LEAST_TOP1, tau,
                 xtol=1e-3, ftol=TAU_TOL, f_lo=at_least)


SHARPNESS_RANGE = (0.25, 16.0)  # the sharpness a fit may take (sim.dyntree.Confidence.sharpness)


def fit_sharpness(tau: float, top1_mean: float, depth: int, topk: int, tree_tokens: int, **kw) -> float | None:
    """The sharpness in SHARPNESS_RANGE at which the confidence model gives `tau` tokens per step
    (tau grows with it: the target takes the drafter's most confident candidate more often),
    solved on its log; None where tau lies beyond what the range's ends give."""
    lo, hi = (math.log(x) for x in SHARPNESS_RANGE)
    f = lambda x: confidence_tau(top1_mean, depth, topk, tree_tokens, sharpness=math.exp(x), **kw)  # noqa: E731
    f_lo, f_hi = f(lo), f(hi)
    if not f_lo <= tau <= f_hi:
        return None
    return math.exp(solve(f, lo, hi, tau, xtol=1e-3, ftol=TAU_TOL, f_lo=f_lo, f_hi=f_hi))


def ranked_rows(top1: list[float], topk_mass: list[float], ranks: int) -> tuple[tuple[float, ...], ...]:
    """Rank probabilities per depth from top-1 and top-k accuracies: rank 0 = top-1, the extra
    top-k mass spread evenly over ranks 1..ranks-1."""
    rows = []
    for a1, ak in zip(top1, topk_mass):
        rest = max(ak - a1, 0.0) / (ranks - 1)
        rows.append(tuple([a1] + [rest] * (ranks - 1)))
    return tuple(rows)


def static_tau(rows, nodes: int, scale: float = 1.0) -> float:
    probs = tuple(tuple(min(1.0, p * scale) for p in row) for row in rows)
    tree = T.greedy_static_tree(probs, nodes)
    return 1.0 + RankDepth(probs).expected(tree)


def main() -> None:
    print("EAGLE-2 dynamic trees (depth 6, top-k 10, 60 tokens; EAGLE-2 defaults):")
    for name, tau in (("Vicuna-7B, EAGLE-2 Table 1", 4.98), ("LLaMA-Instruct 3.1 8B, EAGLE-3 Table 1 (EAGLE-2 row)", 4.05)):
        m = fit_confidence(tau, 6, 10, 60)
        print(f"  {name}: tau {tau} -> top1_mean {m:.4f} (model tau {confidence_tau(m, 6, 10, 60):.3f})")
    m = fit_confidence(6.13, 7, 10, 60)
    print(f"  EAGLE-3, LLaMA-Instruct 3.1 8B (depth 7): tau 6.13 -> top1_mean {m:.4f} (model {confidence_tau(m, 7, 10, 60):.3f})")
    print("Medusa-1 on Vicuna-7B (medusa_acc.csv head accuracies, 63-node greedy tree; tau 2.52 measured by EAGLE-2):")
    rows = ranked_rows([0.560, 0.316, 0.201, 0.147], [0.780, 0.563, 0.417, 0.340], 5)
    print(f"  raw head accuracies give tau {static_tau(rows, 63):.3f}")
    s = solve(lambda x: static_tau(rows, 63, x), 0.1, 1.0 / max(sum(r) for r in rows), 2.52)
    print(f"  scale {s:.4f} -> tau {static_tau(rows, 63, s):.3f}; rows {[[round(min(1, p * s), 4) for p in r] for r in rows]}")
    print("EAGLE static tree on Vicuna-7B (25 nodes, tau 3.94, EAGLE Table 2), rank 0 from 0-alpha..4-alpha:")
    alphas = [0.79, 0.74, 0.72, 0.73, 0.67]
    def tree_tau(share):
        rows = tuple(tuple([a] + [(1 - a) * share * (0.5 ** r) for r in range(3)]) for a in alphas)
        return static_tau(rows, 25)
    sh = solve(tree_tau, 0.0, 1 / 1.75, 3.94)  # at 1 / (1 + 1/2 + 1/4) ranks 1-3 take all the rest
    print(f"  share of the remaining mass on ranks 1-3 (halving): {sh:.4f} -> tau {tree_tau(sh):.3f}")


if __name__ == "__main__":
    main()
