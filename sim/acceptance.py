"""Acceptance models (DESIGN.md §4): how many drafted tokens the target accepts.

- `per_depth`: a chain; depth j is accepted with probability a_j given depth j-1 was.
- `mean_accepted`: tau (tokens per step, bonus included) turned into a constant rate α by solving
  (1 − α^(K+1)) / (1 − α) = tau (Leviathan et al. 2023, eq. 1).
- `rank_depth`: trees; the r-th ranked candidate at depth d is the target's token with probability
  P[d][r] (the events are exclusive across ranks). Exact expectation by dynamic programming over
  the tree; sampling walks the tree.
- `confidence`: EAGLE-2's dynamic trees (Li et al. 2024, arXiv:2406.16858): each candidate carries
  the drafter's confidence, which EAGLE-2 shows is well calibrated with the acceptance rate; trees
  are grown by path confidence and the target's token is the r-th child with probability equal to
  its (calibrated) confidence. See sim/dyntree.py.

Every model answers two questions about a tree: `expected(tree)` (mean accepted drafted nodes)
and `sample(tree, u)` (the accepted root path, from uniforms u).
"""
from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from typing import Sequence

from sim import trees as T


@dataclass(frozen=True)
class CompiledTree:
    """A draft tree with, for every node, the probability that each child is the target's token.

    options[n + 1] lists (cumulative probability, child) for node n (index 0 is the root, n = -1).
    The accepted path is fixed by where the walk stops, so sampling draws the stopping node from
    its distribution in one step: P(stop at n) = P(reach n) x (1 - Σ over n's children of P(child)),
    the same law as walking from the root one draw per level.
    """

    parents: tuple[int, ...]
    options: tuple[tuple[tuple[float, int], ...], ...]
    expected: float  # E[accepted drafted nodes] = Σ over nodes of P(its whole path is accepted)
    depth_sum: int  # Σ over nodes of their depth: the drafted keys tree attention sees
    depth: int  # the deepest node's depth
    stop_cum: tuple[float, ...]  # cumulative P(stop) over (root, node 0, node 1, ...)
    stop_paths: tuple[tuple[int, ...], ...]  # the accepted path when the walk stops there

    def sample(self, random) -> tuple[int, ...]:
        i = bisect_right(self.stop_cum, random())
        return self.stop_paths[min(i, len(self.stop_paths) - 1)]  # min: rounding at the top end

    def walk(self, random) -> list[int]:
        """The same law by walking from the root, one draw per level (tests compare the two)."""
        path: list[int] = []
        opts = self.options[0]
        while opts:
            u = random()
            for cum, child in opts:
                if u < cum:
                    path.append(child)
                    opts = self.options[child + 1]
                    break
            else:
                break
        return path


def compile_tree(parents: Sequence[int], prob) -> CompiledTree:
    """prob(i) = P(node i is the target's token | its parent was accepted)."""
    opts: list[list[tuple[float, int]]] = [[] for _ in range(len(parents) + 1)]
    cum = [0.0] * (len(parents) + 1)
    reach: list[float] = []
    for i, par in enumerate(parents):
        p = prob(i)
        cum[par + 1] += p
        if cum[par + 1] > 1.0 + 1e-9:
            raise ValueError(f"children of node {par} have acceptance probabilities summing past 1")
        if p > 0:
            opts[par + 1].append((cum[par + 1], i))
        reach.append(p * (1.0 if par < 0 else reach[par]))
    paths: list[tuple[int, ...]] = [()]
    for i, par in enumerate(parents):
        paths.append((paths[par + 1] if par >= 0 else ()) + (i,))
    stops, acc = [], 0.0
    for n, r in enumerate([1.0] + reach):
        acc += r * max(0.0, 1.0 - cum[n])
        stops.append(acc)
    depth = T.depths(parents)
    return CompiledTree(tuple(parents), tuple(tuple(o) for o in opts), sum(reach), sum(depth), max(depth, default=0),
                        tuple(stops), tuple(paths))


@dataclass(frozen=True)
class RankDepth:
    """P[d-1][r]: probability that the r-th ranked candidate at depth d is the target's token.
    A chain model is the special case with one rank per depth."""

    probs: tuple[tuple[float, ...], ...]

    def p_row(self, depth: int) -> tuple[float, ...]:
        return self.probs[min(depth, len(self.probs)) - 1]  # depths past the table reuse its last row

    def p(self, depth: int, rank: int) -> float:
        row = self.p_row(depth)
        return row[rank] if rank < len(row) else 0.0

    def compile(self, parents: Sequence[int]) -> CompiledTree:
        d, r = T.depths(parents), T.ranks(parents)
        return compile_tree(parents, lambda i: self.p(d[i], r[i]))

    def expected(self, parents: Sequence[int]) -> float:
        return self.compile(parents).expected


def chain_rates(per_depth: Sequence[float]) -> RankDepth:
    return RankDepth(tuple((a,) for a in per_depth))


def solve_rate(tau: float, k: int) -> float:
    """The constant per-depth acceptance α with (1 − α^(k+1))/(1 − α) = tau, by bisection."""
    if not 1.0 <= tau <= k + 1:
        raise ValueError(f"mean accepted tokens {tau} must lie in [1, k+1 = {k + 1}]")
    lo, hi = 0.0, 1.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if chain_expected_tokens(mid, k) < tau:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def chain_expected_tokens(alpha: float, k: int) -> float:
    """Leviathan et al. 2023: expected tokens per step of a K-chain with constant rate α."""
    if alpha >= 1.0:
        return k + 1.0
    return (1.0 - alpha ** (k + 1)) / (1.0 - alpha)
