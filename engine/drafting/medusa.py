"""`medusa`: K residual heads on the target's last feature guess the tokens 1..K places after the
last sampled one (Cai et al. 2024, arXiv:2401.10774), in one pass and independently per depth.
The candidates form the scheme's static tree (greedy for its acceptance profile, as the simulator
builds it; a chain without a profile): node j at depth d is head d's ranks[j]-th token.
`typical: true` verifies with Medusa's typical acceptance (lossy; engine/verify.py).
"""
from __future__ import annotations

import torch

from engine.drafting.base import RANKS, DraftPlan, ModelDrafter
from sim import trees as T
from sim.errors import SpecError



class MedusaDrafter(ModelDrafter):
    def __init__(self, scheme, ctx, heads):
        super().__init__(scheme, ctx)
        if scheme.max_depth > heads.heads:
            node = scheme.node
            raise SpecError(node.file if node else None, f"{node.path if node else 'speculation'}.heads",
                            f"the family has {heads.heads} Medusa heads; {scheme.max_depth} asked for")
        self.heads = heads

    def draft(self, seqs, ks):
        h = []
        for s in seqs:
            f = self.feats[s.id]
            n = self.ctx.index(s.id).shape[0]
            h.append(f.take(n - 1, n)[0])
            f.drop_before(n - 1)
        logits = self.heads.logits(torch.stack(h))  # (K, B, V)
        K = max(ks)
        top = logits[:K].topk(RANKS, dim=-1).indices.tolist()  # [depth][b][rank]
        out = []
        for b, k in enumerate(ks):
            tree = self.scheme.tree(k)
            dep, ranks = T.depths(tree), T.ranks(tree)
            toks = []
            for j in range(len(tree)):
                d, r = dep[j] - 1, ranks[j]
                toks.append(top[d][b][r] if r < RANKS else int(logits[d, b].topk(r + 1).indices[-1]))
            cands = {j: top[dep[j]][b] for j in range(len(tree)) if dep[j] < k}
            cands[-1] = top[0][b]
            out.append(DraftPlan(parents=tuple(tree), tokens=tuple(toks), cands=cands))
        return out
