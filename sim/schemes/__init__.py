"""Scheme registry (DESIGN.md §6): one file a scheme, keyed by the YAML string `scheme:`.

A scheme tells both executors, per running sequence and step, what to draft (a tree given as
parent indices, and the drafter's forward passes for the cost model) and how the verified tree is
accepted. `none` is the baseline; the speculative schemes register themselves the same way.
"""
from __future__ import annotations

from pathlib import Path

from sim.models import ModelSpec
from sim.schemes.base import Scheme, SpecScheme
from sim.schemes.draft import DraftModel
from sim.schemes.eagle import Eagle
from sim.schemes.eagle2 import Eagle2
from sim.schemes.medusa import Medusa
from sim.schemes.mtp import MTP
from sim.schemes.ngram import NGram
from sim.schemes.none import NoSpeculation
from sim.specio import Node

REGISTRY: dict[str, type[Scheme]] = {cls.name: cls for cls in (NoSpeculation, DraftModel, Medusa, Eagle, Eagle2, MTP, NGram)}

SchemeSpec = Scheme

__all__ = ["REGISTRY", "Scheme", "SchemeSpec", "SpecScheme", "scheme_from_node"]


def scheme_from_node(node: Node, model: ModelSpec, base_dir: Path = Path(".")) -> Scheme:
    name = node.tag("scheme", list(REGISTRY))
    return REGISTRY[name].from_node(node, model, base_dir)
