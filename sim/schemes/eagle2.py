"""`eagle2`: EAGLE-2's dynamic draft tree (Li et al. 2024, arXiv:2406.16858): the EAGLE head is run
`depth` times, each pass expanding the `topk` most confident frontier nodes by `topk` children;
all candidates are reranked by path confidence and the best `tree_tokens` verified in one
tree-masked pass. Acceptance comes from a `confidence` model (sim/dyntree.py)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sim.drafters import eagle_head
from sim.models import ModelSpec
from sim.schemes.base import MAX_TREE, ModelDraftScheme, parse_common
from sim.specio import Node


@dataclass(frozen=True)
class Eagle2(ModelDraftScheme):
    name = "eagle2"
    tree_levels = True
    shared_lm = True  # the target's LM head (engine/drafting/heads.py)
    topk: int = 8
    tree_tokens: int = 60
    head: ModelSpec | None = None

    dynamic = True

    @classmethod
    def from_node(cls, node: Node, model: ModelSpec, base_dir: Path) -> "Eagle2":
        f, common = parse_common(cls, node, ("topk", "tree_tokens"), "depth", base_dir, max_depth=16)
        topk = f["topk"].integer(lo=1, hi=64) if "topk" in f else 8
        tokens = f["tree_tokens"].integer(lo=1, hi=MAX_TREE) if "tree_tokens" in f else 60
        depth = common["max_depth"]
        budget = topk + (depth - 1) * topk * topk  # Eagle2.candidates
        if tokens > budget:
            raise (f.get("tree_tokens") or node).error(
                f"a tree of {tokens} tokens is larger than its budget: depth {depth} with top-{topk} "
                f"expansion drafts at most {budget} candidates")
        scheme = cls(topk=topk, tree_tokens=tokens, head=eagle_head(model), **common)
        if scheme.acceptance is not None and scheme.acceptance.confidence is None:
            raise f["acceptance"].error("eagle2 needs a `confidence` acceptance model (or a profile holding one)")
        return scheme

    def max_nodes(self) -> int:
        return self.tree_tokens

    def nodes_at(self, depth: int) -> int:
        return min(self.tree_tokens, self.topk + (depth - 1) * self.topk * self.topk)

    def params(self) -> dict:
        return {**super().params(), "topk": self.topk, "tree_tokens": self.tree_tokens}

    def drafter_spec(self):
        return self.head, True

    def candidates(self, depth: int) -> int:
        """Candidates the drafter scores per sequence: the root's top-k, then k x k at each further depth."""
        return self.topk + (depth - 1) * self.topk * self.topk

    def drafter(self, trace):
        """The head's passes, and the host's bookkeeping of every candidate they score
        (hardware.draft_cand_s: recording it, choosing the frontier and the kept tree)."""
        passes = super().drafter(trace)
        per = trace.hardware.draft_cand_s
        if not per:
            return passes

        def price(n, ctx, depth, tree, fresh, first, several):
            c = passes(n, ctx, depth, tree, fresh, first, several)
            return c._replace(time=c.time + per * n * self.candidates(depth))
        return price

    def passes(self, n, depth, tree, fresh, first, several):
        """The root pass catches up on the fresh committed entries (as `eagle`), then depth - 1
        passes over the k most confident frontier nodes of each sequence."""
        return [(fresh, n, several)] + [n * self.topk] * (depth - 1)
