"""A drafter's own KV cache and the layout of its passes.

A drafter with attention (the draft model, the EAGLE head, each MTP module) keeps K/V per entry of
the sequence it models. Its committed entries sit at the *target's* committed slots, shifted past
a scratch region: committed entry p of a sequence lives at `scratch + kv.index(seq)[p]`, which
stays the sequence's own until it is released (sim.kv), so nothing here allocates pages. Drafted
entries (a chain's or a tree's nodes, which may be rejected) use the scratch region: batch row b
owns slots b*MAX_NODES .. (b+1)*MAX_NODES - 1, rewritten every step.

`pack` lays out one drafter pass in the kernels' contract (engine.model.StepBatch): per sequence
the committed entries it has not processed yet (a..n-1) and the drafted entries from j0 on, the
latter seeing the committed entries and their ancestors among the drafted ones (tree mask).
A drafted entry at depth d (parents -1 hang off committed entry n-1) sits at RoPE position n-1+d.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch

from engine.kv_cache import KVCache
from engine.model import StepBatch
from kernels import NO_TREE, ancestor_masks
from kernels.attention import MAX_TREE_NODES
from sim.models import ModelSpec

MAX_NODES = MAX_TREE_NODES  # drafted entries per sequence per pass (the kernels' tree mask width)


class DraftCache(KVCache):
    """KVCache whose first `rows * MAX_NODES` slots are scratch for drafted entries."""

    def __init__(self, spec: ModelSpec, rows: int, page_size: int, device="cpu", dtype=torch.float32):
        self.scratch = rows * MAX_NODES
        super().__init__(spec, -(-self.scratch // page_size) + 1, page_size, device, dtype)

    def committed(self, index: torch.Tensor) -> torch.Tensor:
        """Target slots (n,) -> this cache's slots (n,)."""
        return index + self.scratch

    def spec_slots(self, row: int, count: int) -> list[int]:
        assert count <= MAX_NODES, f"{count} drafted entries; at most {MAX_NODES}"
        return list(range(row * MAX_NODES, row * MAX_NODES + count))


@dataclass
class Row:
    """One sequence's share of a drafter pass."""

    index: torch.Tensor  # (n,) int64 this cache's slots of committed entries 0..n-1
    first: int  # first committed entry to process (a); a == n: none
    parents: Sequence[int] = ()  # drafted entries' tree (-1: child of committed entry n-1)
    slots: Sequence[int] = ()  # their scratch slots
    first_node: int = 0  # drafted entries from here on are queries (earlier ones are in the cache)


def depths_of(parents: Sequence[int]) -> list[int]:
    out: list[int] = []
    for p in parents:
        out.append(1 if p < 0 else out[p] + 1)
    return out


@dataclass(frozen=True)
class Span:
    """Where a row's queries landed: flat rows [start, end), committed entries first (`mid` is
    the first node row); logits rows [lstart, lstart + end - mid + 1) hold the last committed
    entry's (when it had one) and then every node's."""

    start: int
    mid: int
    end: int
    lstart: int
    has_root: bool


def pack(rows: Sequence[Row], device) -> tuple[StepBatch, list[Span]]:
    """The pass's StepBatch (token ids 0: drafters pass `inputs`, or set them) and its spans."""
    rope, store, qseq, qpos, anc, tstart, lens, spans, lrows = [], [], [], [], [], [], [], [], []
    for b, r in enumerate(rows):
        n, a, t = int(r.index.shape[0]), r.first, len(r.parents)
        start = len(rope)
        rope.extend(range(a, n))
        qpos.extend(range(a, n))
        store.extend(r.index[a:n].tolist())
        anc.extend([0] * (n - a))
        mid = len(rope)
        lstart = len(lrows)
        if n > a:
            lrows.append(mid - 1)
        if t:
            d = depths_of(r.parents)
            masks = ancestor_masks(r.parents)
            for j in range(r.first_node, t):
                rope.append(n - 1 + d[j])
                qpos.append(n + j)
                store.append(r.slots[j])
                anc.append(masks[j])
            tstart.append(n)
        else:
            tstart.append(NO_TREE)
        qseq.extend([b] * (len(rope) - start))
        lrows.extend(range(mid, len(rope)))
        lens.append(n + t)
        spans.append(Span(start, mid, len(rope), lstart, n > a))
    L = max(lens, default=0)
    kv = torch.zeros((len(rows), L), dtype=torch.int64)
    for b, r in enumerate(rows):
        n = int(r.index.shape[0])
        kv[b, :n] = r.index
        if len(r.slots):
            kv[b, n:n + len(r.slots)] = torch.as_tensor(list(r.slots), dtype=torch.int64)
    t64 = lambda x: torch.as_tensor(x, dtype=torch.int64).to(device)  # noqa: E731
    N = len(rope)
    step = StepBatch(token_ids=torch.zeros(N, dtype=torch.int64, device=device), rope_pos=t64(rope),
                     store_slots=t64(store), kv_slots=kv.to(device), kv_lens=t64(lens), q_seq=t64(qseq),
                     q_pos=t64(qpos), tree_start=t64(tstart), q_anc=t64(anc), logit_rows=t64(lrows),
                     max_pos=max(rope, default=0), row_start=[s.start for s in spans],
                     logit_start=[s.lstart for s in spans])
    return step, spans
