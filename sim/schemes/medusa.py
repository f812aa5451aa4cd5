"""`medusa`: K residual heads on the last hidden state, run in one pass, each guessing the token
at its own offset (Cai et al. 2024, arXiv:2401.10774); the candidates form a static tree verified
with tree attention. The tree is the greedy one for the acceptance profile (Medusa §3.3.1):
`tree: medusa-63` (63 nodes), `tree: N` nodes, or `tree: chain`. `typical: true` marks Medusa's
typical acceptance (lossy; the acceptance profile must describe it). `lm_head: own` (the default,
as in Medusa §2.1.1: head k ends in its own h x V matrix, initialised from the target's) or
`shared` (every head reads the target's LM head, one matrix for all heads' rows: the engine's
family heads)."""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

from sim import trees as T
from sim.cost import whole_shapes
from sim.drafters import medusa_cost
from sim.models import ModelSpec
from sim.schemes.base import MAX_TREE, SpecScheme, need_rank_acceptance, parse_common
from sim.specio import Node


def parse_tree(f: dict[str, Node], default: str) -> int | None:
    """`chain` -> None; `medusa-63` / an integer -> that many nodes."""
    if "tree" not in f:
        value = default
    elif isinstance(f["tree"].value, int) and not isinstance(f["tree"].value, bool):
        return f["tree"].integer(lo=1, hi=MAX_TREE)
    else:
        value = f["tree"].string()
    if value == "chain":
        return None
    if value.startswith("medusa-") and value[7:].isdigit() and 1 <= int(value[7:]) <= MAX_TREE:
        return int(value[7:])
    raise f["tree"].error(f"expected chain, medusa-<nodes> or a node count (1..{MAX_TREE}), got {value!r}")


@dataclass(frozen=True)
class Medusa(SpecScheme):
    name = "medusa"
    tree_nodes: int | None = 63
    typical: bool = False
    shared_lm_head: bool = False

    @classmethod
    def from_node(cls, node: Node, model: ModelSpec, base_dir: Path) -> "Medusa":
        f, common = parse_common(cls, node, ("tree", "typical", "lm_head"), "heads", base_dir, max_depth=16)
        shared = f["lm_head"].string(("own", "shared")) == "shared" if "lm_head" in f else False
        scheme = cls(tree_nodes=parse_tree(f, "medusa-63"), typical=f["typical"].boolean() if "typical" in f else False,
                     shared_lm_head=shared, **common)
        need_rank_acceptance(scheme, "a Medusa tree")
        if scheme.tree_nodes and scheme.acceptance is not None:
            built = len(scheme.tree(scheme.max_depth))
            if built < scheme.tree_nodes:
                if "tree" not in f:  # the default tree, cut to what the heads and profile can hold
                    return replace(scheme, tree_nodes=built)
                raise f["tree"].error(f"a {scheme.tree_nodes}-node tree is larger than its budget: {scheme.max_depth} "
                                      f"heads with this acceptance profile hold at most {built} nodes")
        return scheme

    def tree(self, depth: int) -> tuple[int, ...]:
        return static_tree(self, depth)

    def params(self) -> dict:
        return {**super().params(), "heads": self.max_depth, "tree_nodes": self.tree_nodes or "chain",
                "typical_acceptance_lossy": self.typical, "lm_head": "shared" if self.shared_lm_head else "own"}

    def matrix_shapes(self, model, tp=1):
        """The heads' h x h blocks and the LM head (sim.drafters.medusa_cost)."""
        h = model.hidden
        return whole_shapes([(h, h / tp), (h, model.vocab / tp)])

    def drafter(self, trace):
        model, hw, tp, heads, shared = trace.model, trace.hardware.drafter(), trace.tp, self.max_depth, self.shared_lm_head
        # the heads read the last hidden state only: no catch-up
        return lambda n, ctx, depth, tree, fresh, first, several: medusa_cost(model, hw, tp, heads, n, shared,
                                                                              len(tree) if tree else depth)


def static_tree(scheme, depth: int) -> tuple[int, ...]:
    """A scheme's static tree (`tree_nodes` greedy nodes for its profile) at `depth`, or a chain."""
    if scheme.tree_nodes is None or scheme.acceptance is None:
        return T.chain(depth)
    return _static(scheme.acceptance.rank.probs, scheme.tree_nodes, scheme.max_depth, depth)


@lru_cache(maxsize=64)
def _static(probs, nodes: int, max_depth: int, depth: int) -> tuple[int, ...]:
    """The greedy tree at full depth, cut to `depth` (a policy's shallower choice)."""
    return T.truncate(T.greedy_static_tree(probs, nodes, max_depth), depth)
