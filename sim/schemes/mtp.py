"""`mtp`: DeepSeek-V3-style multi-token prediction (arXiv:2412.19437 §2.2): D sequential modules,
each one transformer block of the target's kind after a 2h -> h projection of [hidden; next
embedding], sharing the embedding and LM head; the target verifies the chain of D+1."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sim.drafters import PassPricer, mtp_module
from sim.models import ModelSpec
from sim.schemes.base import SpecScheme, need_rank_acceptance, parse_common
from sim.specio import Node


@dataclass(frozen=True)
class MTP(SpecScheme):
    name = "mtp"
    module: ModelSpec | None = None

    @classmethod
    def from_node(cls, node: Node, model: ModelSpec, base_dir: Path) -> "MTP":
        f, common = parse_common(cls, node, (), "depth", base_dir, max_depth=8)
        scheme = cls(module=mtp_module(model), **common)
        need_rank_acceptance(scheme, "an MTP chain")
        return scheme

    def drafter(self, trace):
        price = PassPricer(self.module, trace.hardware, trace.tp, fuse_input=True)
        return lambda n, ctx, depth, tree: price(n, ctx, [n] * depth)
