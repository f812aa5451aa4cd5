"""`eagle` and `eagle2`: the EAGLE head drafting over the target's features (Li et al. 2024,
arXiv:2401.15077; EAGLE-2, arXiv:2406.16858).

Every step starts with a root pass: the head catches up on the committed entries it has not seen
(entry p = (h_p, E x_{p+1}) for the target's features h), the last of which, entry n-1, yields
the root feature and the distribution of the first draft. Then one pass per depth over the nodes
being expanded, each a drafted entry (its parent's predicted feature, its own token) in the
head's scratch KV, attending to the committed entries and its ancestors (tree mask):

* `eagle` chain: expand the one node per depth (at temperature > 0 the drafts are sampled from
  the head's warped distribution, and chain rejection sampling gets q);
* `eagle` static tree (`tree: N`): the scheme's tree (greedy for its acceptance profile, as the
  simulator builds it); node j is the ranks[j]-th most likely token under its parent;
* `eagle2`: grow a dynamic tree: the root's top-k; then at each depth expand the k frontier
  nodes of highest path confidence (product of the head's probabilities along the path) by their
  top-k; finally keep the `tree_tokens` most confident nodes (ancestor-closed, since a child's
  confidence never exceeds its parent's; ties keep the older node).

Tree drafts are deterministic given the context, so their q is a point mass (section 7).
"""
from __future__ import annotations

import torch

from engine.drafting.base import RANKS, DraftPlan, ModelDrafter
from engine.drafting.store import MAX_NODES, DraftCache, Row, pack
from sim import trees as T
from sim.errors import SpecError



class Grow:
    """One sequence's draft tree while it grows."""

    def __init__(self, root_feat: torch.Tensor, root_logits: torch.Tensor):
        self.token: list[int] = []
        self.parent: list[int] = []
        self.value: list[float] = []
        self.depth: list[int] = []
        self.feat: dict[int, torch.Tensor] = {-1: root_feat}  # (H,) the expanded nodes' features
        self.logits: dict[int, torch.Tensor] = {-1: root_logits}  # (V,)
        self.entries: list[int] = []  # expanded nodes, in the order their entries were written
        self.probs: list[torch.Tensor] = []  # a sampled chain's q rows

    def add(self, token: int, parent: int, value: float = 1.0) -> int:
        self.token.append(token)
        self.parent.append(parent)
        self.value.append(value)
        self.depth.append(1 if parent < 0 else self.depth[parent] + 1)
        return len(self.token) - 1


class EagleDrafter(ModelDrafter):
    def __init__(self, scheme, ctx, head, dynamic: bool = False):
        super().__init__(scheme, ctx)
        self.head, self.dynamic = head, dynamic
        if dynamic and (scheme.max_depth - 1) * scheme.topk > MAX_NODES:
            node = scheme.node
            raise SpecError(node.file if node else None, f"{node.path if node else 'speculation'}.depth",
                            f"the engine's draft tree holds at most {MAX_NODES} expanded nodes: (depth - 1) x topk = "
                            f"{(scheme.max_depth - 1) * scheme.topk}")
        self.cache = DraftCache(head.model.spec, ctx.rows, ctx.page_size, ctx.device, head.model.dtype)
        self.done: dict[int, int] = {}

    def drop(self, seq_id: int) -> None:
        super().drop(seq_id)
        self.done.pop(seq_id, None)

    # ---- passes ------------------------------------------------------------------------------
    def _root(self, seqs, idx) -> list[Grow]:
        ctx, rows, hs, ts = self.ctx, [], [], []
        for b, s in enumerate(seqs):
            n = idx[b].shape[0]
            a = min(self.done.get(s.id, 0), n - 1)  # entry n-1 always reruns: it gives the root
            rows.append(Row(index=idx[b], first=a))
            f = self.feats[s.id]
            hs.append(f.take(a, n))
            ts.extend(ctx.tokens[s.id][a + 1:n + 1])
            self.done[s.id] = n
            f.drop_before(n - 1)
        step, spans = pack(rows, ctx.device)
        x = self.head.inputs(torch.cat(hs), torch.as_tensor(ts, dtype=torch.int64, device=ctx.device))
        hidden, logits = self.head.model.forward(step, self.cache, inputs=x)
        return [Grow(hidden[sp.mid - 1], logits[sp.lstart]) for sp in spans]

    def _expand(self, idx, grows: list[Grow], todo: dict[int, list[int]]) -> None:
        """One pass over the nodes todo[b] of each sequence b: stores their features and logits."""
        rows, hs, ts, order = [], [], [], []
        for b, nodes in todo.items():
            g = grows[b]
            first = len(g.entries)
            g.entries.extend(nodes)
            pos = {nid: e for e, nid in enumerate(g.entries)}
            parents = [pos.get(g.parent[nid], -1) for nid in g.entries]
            rows.append(Row(index=idx[b], first=idx[b].shape[0], parents=parents,
                            slots=self.cache.spec_slots(b, len(g.entries)), first_node=first))
            hs.extend(g.feat[g.parent[nid]] for nid in nodes)
            ts.extend(g.token[nid] for nid in nodes)
            order.append(b)
        step, spans = pack(rows, self.ctx.device)
        x = self.head.inputs(torch.stack(hs), torch.as_tensor(ts, dtype=torch.int64, device=self.ctx.device))
        hidden, logits = self.head.model.forward(step, self.cache, inputs=x)
        for b, sp in zip(order, spans):
            for k, nid in enumerate(todo[b]):
                grows[b].feat[nid] = hidden[sp.mid + k]
                grows[b].logits[nid] = logits[sp.lstart + k]

    # ---- trees -------------------------------------------------------------------------------
    def draft(self, seqs, ks):
        idx = [self.cache.committed(self.ctx.index(s.id)) for s in seqs]
        self.cache.ensure(max(int(i.max()) for i in idx))
        grows = self._root(seqs, idx)
        if self.dynamic:
            return self._dynamic(idx, grows, ks)
        trees = [self.scheme.tree(k) for k in ks]
        # per tree, once: node depths, sibling ranks, whether it is a chain, which nodes have children
        shapes = [(T.depths(t), T.ranks(t), T.is_chain(t), set(t)) for t in trees]
        sampled = self.ctx.temperature > 0
        cands: list[dict[int, list[int]]] = [{} for _ in seqs]  # keyed by tree node
        gids: list[dict[int, int]] = [{-1: -1} for _ in seqs]  # tree node -> node id in its Grow
        for d in range(1, max(ks) + 1):
            todo: dict[int, list[int]] = {}
            for b, (g, tree) in enumerate(zip(grows, trees)):
                dep, ranks, chain, has_children = shapes[b]
                at = [j for j, dj in enumerate(dep) if dj == d]
                if not at:
                    continue
                for j in at:
                    p = tree[j]
                    lg = g.logits[gids[b][p]]
                    if p not in cands[b]:
                        cands[b][p] = lg.topk(min(RANKS, lg.shape[-1])).indices.tolist()
                    if sampled and chain:
                        tok, q = self.pick(lg[None])
                        g.probs.append(q[0])
                        tok = int(tok)
                    elif ranks[j] < len(cands[b][p]):
                        tok = cands[b][p][ranks[j]]
                    else:
                        tok = int(lg.topk(ranks[j] + 1).indices[-1])
                    gids[b][j] = g.add(tok, gids[b][p])
                expand = [gids[b][j] for j in at if j in has_children]
                if expand:
                    todo[b] = expand
            if todo:
                self._expand(idx, grows, todo)
        return [DraftPlan(parents=tuple(tree), tokens=tuple(g.token[gid[j]] for j in range(len(tree))),
                          probs=torch.stack(g.probs) if g.probs else None, cands=c)
                for g, tree, gid, c in zip(grows, trees, gids, cands)]

    def _dynamic(self, idx, grows: list[Grow], ks) -> list[DraftPlan]:
        return grow_dynamic(grows, ks, self.scheme.topk, self.scheme.tree_tokens,
                            lambda todo: self._expand(idx, grows, todo))


def grow_dynamic(grows: list[Grow], ks: list[int], k: int, tree_tokens: int, expand) -> list[DraftPlan]:
    """EAGLE-2's dynamic tree (Li et al. 2024b) over each sequence's Grow, its root's logits in
    place: the top-k children of the root, then up to ks[b] - 1 times the k most confident
    frontier nodes expanded by their top-k children, and the tree_tokens most confident nodes
    kept. `expand(todo)` runs the head over the nodes todo[b] of each sequence b and stores their
    features and logits in the Grows (EagleDrafter._expand; the calibration's probe fills random
    logits, to time this bookkeeping alone)."""
    cands: list[dict[int, list[int]]] = [{} for _ in grows]
    probs: list[dict[int, list[float]]] = [{} for _ in grows]

    def children(pairs: list[tuple[int, int]]) -> None:
        """Top-k children (by the head's probability) of each (sequence, node), in one call."""
        lg = torch.stack([grows[b].logits[nid] for b, nid in pairs]).float()  # (P, V)
        top = torch.softmax(lg, -1).topk(max(k, RANKS))
        ids, vals = top.indices.tolist(), top.values.tolist()
        for (b, nid), ii, vv in zip(pairs, ids, vals):
            g = grows[b]
            cands[b][nid] = ii[:RANKS]
            probs[b][nid] = vv[:max(k, RANKS)]
            base = 1.0 if nid < 0 else g.value[nid]
            for t, p in zip(ii[:k], vv[:k]):
                g.add(t, nid, base * p)

    children([(b, -1) for b in range(len(grows))])
    frontier = [list(range(k)) for _ in grows]
    for d in range(1, max(ks)):
        todo = {}
        for b, g in enumerate(grows):
            if ks[b] > d:
                todo[b] = sorted(frontier[b], key=lambda j: (-g.value[j], j))[:k]
        if not todo:
            break
        expand(todo)
        starts = {b: len(grows[b].token) for b in todo}
        children([(b, nid) for b, nodes in todo.items() for nid in nodes])
        for b in todo:
            frontier[b] = list(range(starts[b], len(grows[b].token)))
    out = []
    for b, g in enumerate(grows):
        keep = sorted(sorted(range(len(g.token)), key=lambda j: (-g.value[j], j))[:tree_tokens])
        new = {old: i for i, old in enumerate(keep)}
        parents = tuple(-1 if g.parent[j] < 0 else new[g.parent[j]] for j in keep)
        c = {(-1 if nid < 0 else new[nid]): v for nid, v in cands[b].items() if nid < 0 or nid in new}
        # every expanded node's candidates' probabilities, pruned or kept (ids past the kept ones)
        order = {nid: (-1 if nid < 0 else new.get(nid, len(keep) + i)) for i, nid in enumerate(probs[b])}
        out.append(DraftPlan(parents=parents, tokens=tuple(g.token[j] for j in keep), cands=c,
                             cand_probs={order[nid]: v for nid, v in probs[b].items()}))
    return out
