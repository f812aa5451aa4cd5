"""`draft`: an independent small model drafts a chain of K tokens autoregressively (Leviathan et
al. 2023; Chen et al. 2023). At temperature > 0 the drafts are sampled from the draft model's
warped distribution q, which the runner's chain rejection sampling receives.

Its KV (engine/drafting/store.py): committed positions 0..n-1 at the target's slots, processed
lazily (each step catches up from the last processed position); the last sampled token x_n and
the drafts are scratch entries, recomputed next step once committed.
"""
from __future__ import annotations

import torch

from engine.drafting.base import RANKS, DraftPlan, ModelDrafter
from engine.drafting.store import DraftCache, Row, pack
from sim import trees as T


class DraftModelDrafter(ModelDrafter):
    wants_features = False

    def __init__(self, scheme, ctx, model):
        super().__init__(scheme, ctx)
        self.model = model
        self.cache = DraftCache(model.spec, ctx.rows, ctx.page_size, ctx.device, model.dtype)
        self.done: dict[int, int] = {}

    def drop(self, seq_id: int) -> None:
        super().drop(seq_id)
        self.done.pop(seq_id, None)

    def draft(self, seqs, ks):
        ctx, cache = self.ctx, self.cache
        B = len(seqs)
        idx = [cache.committed(ctx.index(s.id)) for s in seqs]
        cache.ensure(max(int(i.max()) if i.numel() else 0 for i in idx))
        toks: list[list[int]] = [[] for _ in range(B)]
        probs: list[list[torch.Tensor]] = [[] for _ in range(B)]
        cands: list[dict[int, list[int]]] = [{} for _ in range(B)]
        live = list(range(B))
        for j in range(1, max(ks) + 1):  # pass j feeds chain node j-1 (x_n first), drafts node j
            rows, ids = [], []
            for b in live:
                s, n = seqs[b], idx[b].shape[0]
                a = self.done.get(s.id, 0) if j == 1 else n
                chain = [ctx.tokens[s.id][n]] + toks[b]  # x_n, then the drafts so far
                rows.append(Row(index=idx[b], first=a, parents=T.chain(j), slots=cache.spec_slots(b, j),
                                first_node=j - 1))
                ids.extend(ctx.tokens[s.id][a:n] if j == 1 else [])
                ids.append(chain[j - 1])
            step, spans = pack(rows, ctx.device)
            step.token_ids = torch.as_tensor(ids, dtype=torch.int64, device=ctx.device)
            _, logits = self.model.forward(step, cache)  # (R, V)
            last = torch.tensor([sp.lstart + int(sp.has_root) for sp in spans], device=ctx.device)
            tok, p = self.pick(logits[last])
            tok = tok.tolist()
            top = logits[last].topk(min(RANKS, logits.shape[-1]), dim=-1).indices.tolist()
            for r, b in enumerate(live):
                cands[b][j - 2] = top[r]  # ranked candidates under chain node j-2 (-1: the root)
                toks[b].append(tok[r])
                if p is not None:
                    probs[b].append(p[r])
            if j == 1:
                for b in live:
                    self.done[seqs[b].id] = idx[b].shape[0]
            live = [b for b in live if ks[b] > j]
        out = []
        for b in range(B):
            pr = torch.stack(probs[b]) if probs[b] else None
            out.append(DraftPlan(parents=T.chain(ks[b]), tokens=tuple(toks[b]), probs=pr, cands=cands[b]))
        return out
