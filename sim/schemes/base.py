"""The interface every scheme implements, and the parts they share."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from sim.cost import Cost
from sim.models import ModelSpec
from sim.specio import Node


ZERO_COST = Cost(time=0.0, flops=0.0, bytes=0.0, compute_time=0.0, memory_time=0.0)


@dataclass(frozen=True)
class Scheme:
    name: ClassVar[str]
    label: str  # unique name in a trace's report (defaults to the scheme name)

    @classmethod
    def from_node(cls, node: Node, model: ModelSpec) -> "Scheme":
        raise NotImplementedError

    def params(self) -> dict:
        """The scheme's parameters as written in the report."""
        return {}

    def max_nodes(self) -> int:
        """The largest draft tree it may propose in one step (0 for no speculation)."""
        return 0

    def tree(self, batch_size: int, remaining: int) -> tuple[int, ...]:
        """Parent indices of this step's draft tree for one sequence (empty: plain decode).

        `remaining` is how many tokens the sequence may still emit; a tree never drafts past it.
        """
        return ()


    def draft_cost(self, batch, trace) -> Cost:
        """The drafter's own forward passes for this step, priced by the cost model."""
        return ZERO_COST

    def accept(self, batch, rng) -> list[tuple[int, ...]] | None:
        """Sample each sequence's accepted root path of its draft tree (simulator side)."""
        return None


def label_of(f: dict[str, Node], default: str) -> str:
    return f["label"].string() if "label" in f else default
