"""`eagle`: the EAGLE head (Li et al. 2024, arXiv:2401.15077), one decoder layer over the target's
top features and the next token's embedding reusing the target's LM head, drafting a chain
(`tree: chain`, the default) or a static tree (`tree: N` nodes, greedy for the acceptance profile).
Each depth is one head pass over the tree's frontier."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sim import trees as T
from sim.drafters import eagle_head
from sim.models import ModelSpec
from sim.schemes.base import ModelDraftScheme, need_rank_acceptance, parse_common
from sim.schemes.medusa import parse_tree, static_tree
from sim.specio import Node


@dataclass(frozen=True)
class Eagle(ModelDraftScheme):
    name = "eagle"
    tree_levels = True
    shared_lm = True  # the target's LM head (engine/drafting/heads.py)
    tree_nodes: int | None = None
    head: ModelSpec | None = None

    @classmethod
    def from_node(cls, node: Node, model: ModelSpec, base_dir: Path) -> "Eagle":
        f, common = parse_common(cls, node, ("tree",), "depth", base_dir, max_depth=16)
        scheme = cls(tree_nodes=parse_tree(f, "chain"), head=eagle_head(model), **common)
        need_rank_acceptance(scheme, "an EAGLE chain or static tree")
        return scheme

    def tree(self, depth: int) -> tuple[int, ...]:
        return static_tree(self, depth)

    def params(self) -> dict:
        return {**super().params(), "tree_nodes": self.tree_nodes or "chain"}

    def drafter_spec(self):
        return self.head, True

    def passes(self, n, depth, tree, fresh, first, several):
        """The head's passes (engine/drafting/eagle.py): the root pass catches up on the fresh
        committed entries (logits at the last one, the root); then pass j expands the tree's
        nodes at depth j that have children."""
        return [(fresh, n, several)] + [n * e for e in T.expanding(tree, depth) if e]  # the engine skips a level that expands nothing
