"""Draft trees given as parent indices (DESIGN.md §10): node i's parent is parents[i] (< i), or -1
for the last committed token. Children of one node are ranked in node order (rank 0 = the
drafter's top candidate). A chain of K is parents = (-1, 0, 1, ..., K-2)."""
from __future__ import annotations

import heapq
from functools import lru_cache
from typing import Sequence


@lru_cache(maxsize=256)
def chain(k: int) -> tuple[int, ...]:
    return tuple(range(-1, k - 1))


def is_chain(parents: Sequence[int]) -> bool:
    """Whether a draft shape is a chain (node i's parent is i - 1; the empty shape too): the
    engine verifies those with its chain routine, without a tree walk."""
    return all(a == i - 1 for i, a in enumerate(parents))


def depths(parents: Sequence[int]) -> list[int]:
    """Depth of each node (1 for children of the root)."""
    d: list[int] = []
    for p in parents:
        d.append(1 if p < 0 else d[p] + 1)
    return d


def expanding(parents: Sequence[int], depth: int) -> list[int]:
    """Nodes at each depth 1..depth-1 that have children: what each of a drafter's tree levels
    after its root pass expands (an EAGLE head's pass j runs over the depth-j nodes it expands)."""
    d, has_children = depths(parents), set(parents)
    return [sum(1 for i in range(len(parents)) if d[i] == k and i in has_children) for k in range(1, depth)]


def ranks(parents: Sequence[int]) -> list[int]:
    """Rank of each node among its siblings, in node order."""
    seen: dict[int, int] = {}
    out = []
    for p in parents:
        r = seen.get(p, 0)
        out.append(r)
        seen[p] = r + 1
    return out


def is_tree(parents: Sequence[int]) -> bool:
    return all(-1 <= p < i for i, p in enumerate(parents))


def truncate(parents: Sequence[int], max_depth: int) -> tuple[int, ...]:
    """The subtree of nodes at depth <= max_depth, renumbered in order."""
    d = depths(parents)
    keep = [i for i in range(len(parents)) if d[i] <= max_depth]
    new = {old: j for j, old in enumerate(keep)}
    return tuple(-1 if parents[i] < 0 else new[parents[i]] for i in keep)


def greedy_static_tree(rank_probs: Sequence[Sequence[float]], nodes: int, max_depth: int | None = None) -> tuple[int, ...]:
    """The static tree of `nodes` nodes that greedily maximises the expected accepted length
    when the r-th ranked candidate at depth d is the target's token with probability
    rank_probs[d-1][r] (Medusa's construction, Cai et al. 2024 §3.3.1): repeatedly add the
    candidate node whose whole path is most likely to be accepted. Output in breadth-first order.
    """
    max_depth = len(rank_probs) if max_depth is None else min(max_depth, len(rank_probs))
    # heap of candidates: (-path_prob, tiebreak, parent_key, depth, rank, path_prob); parent_key = path tuple
    heap: list = []
    counter = 0

    def push(parent_path: tuple, depth: int, rank: int, parent_prob: float):
        nonlocal counter
        if depth > max_depth or rank >= len(rank_probs[depth - 1]):
            return
        p = parent_prob * rank_probs[depth - 1][rank]
        if p <= 0:
            return
        heapq.heappush(heap, (-p, counter, parent_path, depth, rank, p))
        counter += 1

    push((), 1, 0, 1.0)
    chosen: list[tuple] = []  # paths of ranks
    while heap and len(chosen) < nodes:
        _, _, parent_path, depth, rank, p = heapq.heappop(heap)
        path = parent_path + (rank,)
        chosen.append(path)
        push(path, depth + 1, 0, p)  # its first child
        push(parent_path, depth, rank + 1, p / rank_probs[depth - 1][rank] if rank_probs[depth - 1][rank] else 0.0)
    return from_paths(chosen)


def from_paths(paths: Sequence[Sequence[int]]) -> tuple[int, ...]:
    """Parents of a tree given as rank paths (e.g. [(0,), (1,), (0, 0)]), breadth-first, siblings by rank."""
    ordered = sorted(set(tuple(p) for p in paths), key=lambda p: (len(p), p))
    index = {p: i for i, p in enumerate(ordered)}
    parents = []
    for p in ordered:
        if len(p) > 1 and p[:-1] not in index:
            raise ValueError(f"path {p} has no parent {p[:-1]} in the tree")
        parents.append(-1 if len(p) == 1 else index[p[:-1]])
    return tuple(parents)
