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
    parent = [-1] * topk
    conf = list(model.confidences(rng, 1, topk, 1)[0])
    value = list(conf)
    level = list(range(topk))  # node ids of the newest level
    dep = [1] * topk
    for d in range(2, depth + 1):
        vals = np.array([value[i] for i in level])
        expand = [level[i] for i in np.argsort(-vals, kind="stable")[:topk]]
        c = model.confidences(rng, len(expand), topk, d)
        new = []
        for row, p in enumerate(expand):
            for r in range(topk):
                new.append(len(parent))
                parent.append(p)
                conf.append(float(c[row, r]))
                value.append(value[p] * float(c[row, r]))
                dep.append(d)
        level = new
    # rerank: best tree_tokens by value; a child's value never exceeds its parent's, and ties
    # break toward shallower nodes, so every kept node's parent is kept too
    order = sorted(range(len(parent)), key=lambda i: (-value[i], dep[i], i))[:tree_tokens]
    keep = sorted(order, key=lambda i: (dep[i], -value[i], i))
    new_id = {old: j for j, old in enumerate(keep)}
    parents = tuple(-1 if parent[i] < 0 else new_id[parent[i]] for i in keep)
    probs = [model.calibration * conf[i] for i in keep]
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
