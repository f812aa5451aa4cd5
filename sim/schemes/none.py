"""`none`: plain autoregressive decoding, one token per sequence per step; the usual baseline."""
from __future__ import annotations

from dataclasses import dataclass

from sim.models import ModelSpec
from sim.schemes.base import Scheme, label_of
from sim.specio import Node


@dataclass(frozen=True)
class NoSpeculation(Scheme):
    name = "none"

    @classmethod
    def from_node(cls, node: Node, model: ModelSpec) -> "NoSpeculation":
        f = node.mapping(("scheme", "label"))
        return cls(label=label_of(f, cls.name))
