"""`eagle`: the EAGLE head (Li et al. 2024, arXiv:2401.15077), one decoder layer over the target's
top features and the next token's embedding reusing the target's LM head, drafting a chain
(`tree: chain`, the default) or a static tree (`tree: N` nodes, greedy for the acceptance profile).
Each depth is one head pass over the tree's frontier."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sim import trees as T
from sim.drafters import PassPricer, eagle_head
from sim.models import ModelSpec
from sim.schemes.base import SpecScheme, need_rank_acceptance, parse_common
from sim.schemes.medusa import parse_tree, static_tree
from sim.specio import Node


def frontier_tokens(n: int, parents: tuple[int, ...], depth: int) -> list[int]:
    """Tokens the head processes per pass: pass j expands the nodes at depth j-1 (the root first)."""
    d = T.depths(parents)
    expanding = [1] + [sum(1 for i in range(len(parents)) if d[i] == k and any(p == i for p in parents))
                       for k in range(1, depth)]
    return [n * max(e, 1) for e in expanding]


@dataclass(frozen=True)
class Eagle(SpecScheme):
    name = "eagle"
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

    def drafter(self, trace):
        price = PassPricer(self.head, trace.hardware, trace.tp, fuse_input=True)
        return lambda n, ctx, depth, tree: price(n, ctx, frontier_tokens(n, tree, depth))
