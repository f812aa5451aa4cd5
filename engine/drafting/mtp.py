"""`mtp`: D DeepSeek-V3-style MTP modules (arXiv:2412.19437 §2.2) draft a chain of D tokens, one
module per depth (engine/target.py has the modules' definition and training).

Module k at entry p reads h^{k-1}_p (the target's feature for k = 1, module k-1's output
otherwise) and the embedding of x_{p+k}, and predicts x_{p+k+1}. With committed tokens x_0..x_n
(x_n just sampled), module k's entries 0..n-k are committed (their tokens are known); entries
n-k+1..n-1 read drafted tokens, so they are scratch entries, recomputed next step. The draft at
depth k is module k's prediction at entry n-1. Each module keeps its own KV (one layer) and its
committed outputs until module k+1 has consumed them.
"""
from __future__ import annotations

import torch

from engine.drafting.base import RANKS, DraftPlan, Features, ModelDrafter
from engine.drafting.store import DraftCache, Row, pack
from sim import trees as T
from sim.errors import SpecError


class MTPDrafter(ModelDrafter):
    def __init__(self, scheme, ctx, modules):
        super().__init__(scheme, ctx)
        if scheme.max_depth > len(modules):
            node = scheme.node
            raise SpecError(node.file if node else None, f"{node.path if node else 'speculation'}.depth",
                            f"the model has {len(modules)} MTP module(s); {scheme.max_depth} asked for")
        self.modules = modules[:scheme.max_depth]
        self.caches = [DraftCache(m.model.spec, ctx.rows, ctx.page_size, ctx.device, m.model.dtype)
                       for m in self.modules]
        self.done: list[dict[int, int]] = [{} for _ in self.modules]
        self.outs: list[dict[int, Features]] = [{} for _ in self.modules]  # module k's committed outputs

    def drop(self, seq_id: int) -> None:
        super().drop(seq_id)
        for d in self.done + self.outs:
            d.pop(seq_id, None)

    def _inputs(self, k: int, sid: int, a: int, n: int, spec: torch.Tensor | None) -> torch.Tensor:
        """h^{k-1} at entries a..n-1: committed rows, then module k-1's scratch rows of this step."""
        if k == 1:
            return self.feats[sid].take(a, n)
        c_prev = n - k + 2  # module k-1's committed entries
        rows = self.outs[k - 2][sid].take(a, c_prev)
        return torch.cat([rows, spec]) if spec is not None and spec.shape[0] else rows

    def draft(self, seqs, ks):
        ctx = self.ctx
        B = len(seqs)
        base = [ctx.index(s.id) for s in seqs]
        toks: list[list[int]] = [[] for _ in range(B)]
        probs: list[list[torch.Tensor]] = [[] for _ in range(B)]
        spec_prev: list[torch.Tensor | None] = [None] * B
        cands: list[dict[int, list[int]]] = [{} for _ in range(B)]
        live = [b for b in range(B) if base[b].shape[0] >= 1]
        for k in range(1, max(ks) + 1):
            live = [b for b in live if ks[b] >= k and base[b].shape[0] - k + 1 >= 1]
            if not live:
                break
            m, cache = self.modules[k - 1], self.caches[k - 1]
            rows, hs, ts, meta = [], [], [], []
            for r, b in enumerate(live):
                s, n = seqs[b], base[b].shape[0]
                c = n - k + 1  # committed entries of module k
                idx = cache.committed(base[b][:c])
                cache.ensure(int(idx.max()))
                a = min(self.done[k - 1].get(s.id, 0), c - 1)
                rows.append(Row(index=idx, first=a, parents=T.chain(k - 1), slots=cache.spec_slots(r, k - 1)))
                hs.append(self._inputs(k, s.id, a, n, spec_prev[b]))
                seq_toks = ctx.tokens[s.id][:n + 1] + toks[b]  # x_0..x_n, then the drafts
                ts.extend(seq_toks[a + k:n + k])
                meta.append((b, a, c))
            step, spans = pack(rows, ctx.device)
            x = m.inputs(torch.cat(hs), torch.as_tensor(ts, dtype=torch.int64, device=ctx.device))
            hidden, logits = m.model.forward(step, cache, inputs=x)
            last = torch.tensor([sp.lstart + (sp.end - sp.mid) + int(sp.has_root) - 1 for sp in spans],
                                device=ctx.device)
            tok, p = self.pick(logits[last])
            tok = tok.tolist()
            top = logits[last].topk(min(RANKS, logits.shape[-1]), dim=-1).indices.tolist()
            for r, ((b, a, c), sp) in enumerate(zip(meta, spans)):
                sid = seqs[b].id
                cands[b][k - 2] = top[r]  # ranked candidates under chain node k-2 (-1: the root)
                toks[b].append(tok[r])
                if p is not None:
                    probs[b].append(p[r])
                out = self.outs[k - 1].get(sid)
                committed = hidden[sp.start:sp.mid]  # entries a..c-1
                if out is None:
                    self.outs[k - 1][sid] = Features(a, committed)
                elif c > out.end:
                    out.append(out.end, committed[out.end - a:])
                spec_prev[b] = hidden[sp.mid:sp.end]
                self.done[k - 1][sid] = c
                prev = self.feats.get(sid) if k == 1 else self.outs[k - 2].get(sid)
                prev.drop_before(c - 1)
        return [DraftPlan(parents=T.chain(len(t)), tokens=tuple(t), probs=torch.stack(p) if p else None, cands=c)
                if t else None for t, p, c in zip(toks, probs, cands)]
