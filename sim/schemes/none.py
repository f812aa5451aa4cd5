"""`none`: plain autoregressive decoding, one token per sequence per step; the usual baseline."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sim.models import ModelSpec
from sim.schemes.base import Scheme, parse_label_paging
from sim.specio import Node


@dataclass(frozen=True)
class NoSpeculation(Scheme):
    name = "none"

    @classmethod
    def from_node(cls, node: Node, model: ModelSpec, base_dir: Path) -> "NoSpeculation":
        f = node.mapping(("scheme", "label", "paging"))
        return cls(**parse_label_paging(cls, f))
