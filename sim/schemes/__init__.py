"""Scheme registry (DESIGN.md §6): one file a scheme, keyed by the YAML string `scheme:`.

A scheme tells both executors, per running sequence and step, what to draft (a tree given as
parent indices, and the drafter's forward passes for the cost model) and how the verified tree is
accepted. `none` is the baseline; the speculative schemes register themselves the same way.
"""
from __future__ import annotations

from sim.models import ModelSpec
from sim.schemes.base import Scheme
from sim.schemes.none import NoSpeculation
from sim.specio import Node

REGISTRY: dict[str, type[Scheme]] = {cls.name: cls for cls in (NoSpeculation,)}

SchemeSpec = Scheme


def scheme_from_node(node: Node, model: ModelSpec) -> Scheme:
    if not isinstance(node.value, dict) or "scheme" not in node.value:
        node.mapping(("scheme",), required=("scheme",))
    name = node.child("scheme").string(list(REGISTRY))
    return REGISTRY[name].from_node(node, model)
