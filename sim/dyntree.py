"""EAGLE-2's dynamic draft trees (Li et al. 2024, arXiv:2406.16858, §4), modelled by confidence.

The drafter gives each candidate a confidence; EAGLE-2 observes that confidence is well calibrated
with the acceptance rate (their Fig. 6), grows the tree by expanding, at each depth, the top-k
nodes by path value (product of confidences along the path), then reranks all candidates by value
and keeps the best `tree_tokens` for one tree-masked verify.

Here a node's top-1 confidence is Beta-distributed (mean `top1_mean`, concentration
`top1_concentration`, multiplied by `depth_decay` per depth) and the rest of the probability mass
falls geometrically over the other ranks (ratio `tail`). The target's token is child r with
probability `calibration` × confidence_r. All five numbers are calibratable: a profile states
them and the published tau they reproduce.
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

    def confidences(self, rng: np.random.Generator, n: int, topk: int, depth: int) -> np.ndarray:
        """(n, topk) confidences of the top-k candidates below n nodes at a given depth."""
        m = min(max(self.top1_mean * self.depth_decay ** (depth - 1), 1e-6), 1 - 1e-6)
        a, b = m * self.top1_concentration, (1 - m) * self.top1_concentration
        c1 = rng.beta(a, b, size=n)
        r = np.arange(1, topk)
        rest = (1 - self.tail) * self.tail ** (r - 1)  # shares of the remaining mass, ranks 1..
        return np.concatenate([c1[:, None], (1 - c1)[:, None] * rest[None, :]], axis=1)


def grow(model: Confidence, rng: np.random.Generator, depth: int, topk: int, tree_tokens: int) -> CompiledTree:
    """One dynamic tree: expand top-k by path value for `depth` levels, keep the best `tree_tokens`."""
    c = model.confidences(rng, 1, topk, 1)[0]
    parent, conf, value, dep = [np.full(topk, -1)], [c], [c], [np.ones(topk, dtype=np.int64)]
    level = np.arange(topk)  # node ids of the newest level
    level_value = c
    n = topk
    for d in range(2, depth + 1):
        expand = level[np.argsort(-level_value, kind="stable")[:topk]]
        c = model.confidences(rng, len(expand), topk, d)  # (len(expand), topk)
        level_value = (np.concatenate(value)[expand][:, None] * c).ravel()
        parent.append(np.repeat(expand, topk))
        conf.append(c.ravel())
        value.append(level_value)
        dep.append(np.full(level_value.size, d))
        level = np.arange(n, n + level_value.size)
        n += level_value.size
    parent, conf, value, dep = (np.concatenate(x) for x in (parent, conf, value, dep))
    ids = np.arange(n)
    # rerank: best tree_tokens by value; a child's value never exceeds its parent's, and ties
    # break toward shallower nodes, so every kept node's parent is kept too
    best = np.lexsort((ids, dep, -value))[:tree_tokens]
    keep = best[np.lexsort((best, -value[best], dep[best]))]
    new_id = np.full(n, -1)
    new_id[keep] = np.arange(len(keep))
    parents = tuple(int(new_id[p]) if p >= 0 else -1 for p in parent[keep].tolist())
    probs = (model.calibration * conf[keep]).tolist()
    return compile_tree(parents, lambda j: probs[j])


class TreeLibrary:
    """A fixed, seeded sample of dynamic trees per depth; steps draw from it (cheap per step)."""

    def __init__(self, model: Confidence, topk: int, tree_tokens: int, seed: int, size: int = 128):
        self.model, self.topk, self.tree_tokens, self.seed, self.size = model, topk, tree_tokens, seed, size
        self._by_depth: dict[int, list[CompiledTree]] = {}

    def trees(self, depth: int) -> list[CompiledTree]:
        lib = self._by_depth.get(depth)
        if lib is None:
            rng = np.random.default_rng(np.random.SeedSequence([self.seed, depth]))
            lib = [grow(self.model, rng, depth, self.topk, self.tree_tokens) for _ in range(self.size)]
            self._by_depth[depth] = lib
        return lib

    def expected(self, depth: int) -> float:
        lib = self.trees(depth)
        return sum(t.expected for t in lib) / len(lib)
