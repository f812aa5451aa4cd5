"""EAGLE-2's dynamic draft trees (Li et al. 2024, arXiv:2406.16858, §4), modelled by confidence.

The drafter gives each candidate a confidence; EAGLE-2 observes that confidence is well calibrated
with the acceptance rate (their Fig. 6), grows the tree by expanding, at each depth, the top-k
nodes by path value (product of confidences along the path), then reranks all candidates by value
and keeps the best `tree_tokens` for one tree-masked verify.

Here a node's top-1 confidence is Beta-distributed (mean `top1_mean`, concentration
`top1_concentration`, multiplied by `depth_decay` per depth) and the rest of the probability mass
falls geometrically over the other ranks (ratio `tail`), or in the measured `shares` (the mean
share of that rest at ranks 1, 2, ...: a trained drafter's falls off like 1/rank, far slower
than any geometric ratio fitted to its first rank). The target's token is child r with
probability `calibration` × confidence_r^γ / Z, γ = `sharpness`, Z the same sum over every token
of the vocabulary (the top-k's own, plus the rest of the mass spread evenly over the tokens
beyond them): at γ = 1 the paper's calibrated drafter (Z = 1), above it a drafter whose
top-ranked token the target agrees with more often than its confidence says. The family's
EAGLE head at temperature 0: top-1 confidence 0.39 on average, yet the target takes the top-1
candidate 89% of the time (validation/confidence.py measures γ from the engine's candidates).
A profile states these numbers and the published tau they reproduce.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.acceptance import CompiledTree, compile_tree


@dataclass(frozen=True)
class Confidence:
    top1_mean: float = 0.7
    top1_concentration: float = 4.0
    depth_decay: float = 1.0
    tail: float = 0.5
    calibration: float = 1.0
    sharpness: float = 1.0
    shares: tuple[float, ...] = ()  # ranks 1.. of the mass beyond the top-1; () -> geometric `tail`

    def rest(self, topk: int) -> np.ndarray:
        """(topk - 1,) shares of the mass beyond the top-1 at ranks 1..topk-1: `shares`, ranks
        past its end falling on by its last two entries' ratio; else geometric by `tail`."""
        r = np.arange(1, topk)
        if not self.shares:
            return (1 - self.tail) * self.tail ** (r - 1)
        s = np.asarray(self.shares, dtype=float)
        ratio = s[-1] / s[-2] if len(s) > 1 and s[-2] > 0 else 0.0
        out = np.concatenate([s, s[-1] * ratio ** np.arange(1, max(1, topk - len(s)))])[:topk - 1]
        return out * min(1.0, 1.0 / max(out.sum(), 1e-12))  # at most the whole rest

    def confidences(self, rng: np.random.Generator, n: int, topk: int, depth: int) -> np.ndarray:
        """(n, topk) confidences of the top-k candidates below n nodes at a given depth."""
        m = min(max(self.top1_mean * self.depth_decay ** (depth - 1), 1e-6), 1 - 1e-6)
        a, b = m * self.top1_concentration, (1 - m) * self.top1_concentration
        c1 = rng.beta(a, b, size=n)
        return np.concatenate([c1[:, None], (1 - c1)[:, None] * self.rest(topk)[None, :]], axis=1)

    def accept(self, conf: np.ndarray, vocab: int = 0) -> np.ndarray:
        """(n, k) P(the target's token is each child) of n nodes' k children's confidences `conf`:
        calibration x conf^γ over the vocabulary's sum of conf^γ (the mass beyond the k spread
        evenly over the vocab - k other tokens; 0: one other); conf itself at γ = 1."""
        if self.sharpness == 1.0:
            return self.calibration * conf
        g = self.sharpness
        others = max(1, vocab - conf.shape[1])
        beyond = np.clip(1.0 - conf.sum(axis=1, keepdims=True), 0.0, 1.0)  # (n, 1)
        powered = conf ** g
        z = powered.sum(axis=1, keepdims=True) + others * (beyond / others) ** g
        return self.calibration * powered / np.maximum(z, 1e-300)


def grow(model: Confidence, rng: np.random.Generator, depth: int, topk: int, tree_tokens: int,
         vocab: int = 0) -> CompiledTree:
    """One dynamic tree: expand top-k by path value for `depth` levels, keep the best `tree_tokens`
    (`vocab`: the drafter's, for Confidence.accept)."""
    c = model.confidences(rng, 1, topk, 1)[0]
    parent, value, dep = [np.full(topk, -1)], [c], [np.ones(topk, dtype=np.int64)]
    accept = [model.accept(c[None, :], vocab)[0]]  # P(each node is the target's token | its parent was)
    level = np.arange(topk)  # node ids of the newest level
    level_value = c
    n = topk
    for d in range(2, depth + 1):
        expand = level[np.argsort(-level_value, kind="stable")[:topk]]
        c = model.confidences(rng, len(expand), topk, d)  # (len(expand), topk)
        level_value = (np.concatenate(value)[expand][:, None] * c).ravel()
        parent.append(np.repeat(expand, topk))
        accept.append(model.accept(c, vocab).ravel())
        value.append(level_value)
        dep.append(np.full(level_value.size, d))
        level = np.arange(n, n + level_value.size)
        n += level_value.size
    parent, value, dep, accept = (np.concatenate(x) for x in (parent, value, dep, accept))
    ids = np.arange(n)
    # rerank: best tree_tokens by value; a child's value never exceeds its parent's, and ties
    # break toward shallower nodes, so every kept node's parent is kept too
    best = np.lexsort((ids, dep, -value))[:tree_tokens]
    keep = best[np.lexsort((best, -value[best], dep[best]))]
    new_id = np.full(n, -1)
    new_id[keep] = np.arange(len(keep))
    parents = tuple(int(new_id[p]) if p >= 0 else -1 for p in parent[keep].tolist())
    probs = accept[keep].tolist()
    return compile_tree(parents, lambda j: probs[j])


class TreeLibrary:
    """A fixed, seeded sample of dynamic trees per depth; steps draw from it (cheap per step)."""

    def __init__(self, model: Confidence, topk: int, tree_tokens: int, seed: int, size: int = 128, vocab: int = 0):
        self.model, self.topk, self.tree_tokens, self.seed, self.size = model, topk, tree_tokens, seed, size
        self.vocab = vocab
        self._by_depth: dict[int, list[CompiledTree]] = {}

    def trees(self, depth: int) -> list[CompiledTree]:
        lib = self._by_depth.get(depth)
        if lib is None:
            rng = np.random.default_rng(np.random.SeedSequence([self.seed, depth]))
            lib = [grow(self.model, rng, depth, self.topk, self.tree_tokens, self.vocab) for _ in range(self.size)]
            self._by_depth[depth] = lib
        return lib

    def expected(self, depth: int) -> float:
        lib = self.trees(depth)
        return sum(t.expected for t in lib) / len(lib)
