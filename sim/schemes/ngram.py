"""`ngram`: prompt lookup. The longest recent n-gram match in the sequence proposes the next K
tokens; no model runs, so the drafter costs host time only (`host_us` per sequence). `match`
(default 1) is the probability that a sequence's step finds a match and drafts; on the others it
decodes one token, beside the drafting sequences in the same batch. Its acceptance then
describes the drafted steps only (`python -m validation compare` measures both)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sim.cost import Cost
from sim.models import ModelSpec
from sim.schemes.base import SpecScheme, need_rank_acceptance, parse_common
from sim.specio import Node


@dataclass(frozen=True)
class NGram(SpecScheme):
    name = "ngram"
    max_ngram: int = 3
    host_us: float = 20.0
    match: float = 1.0

    @classmethod
    def from_node(cls, node: Node, model: ModelSpec, base_dir: Path) -> "NGram":
        f, common = parse_common(cls, node, ("ngram", "host_us", "match"), "k", base_dir)
        scheme = cls(max_ngram=f["ngram"].integer(lo=1, hi=64) if "ngram" in f else 3,
                     host_us=f["host_us"].number(lo=0, hi=1e6) if "host_us" in f else 20.0,
                     match=f["match"].number(lo=0, hi=1, lo_open=True) if "match" in f else 1.0, **common)
        need_rank_acceptance(scheme, "an n-gram chain")
        return scheme

    def match_rate(self) -> float:
        return self.match

    def params(self) -> dict:
        return {**super().params(), "ngram": self.max_ngram, "host_us": self.host_us, "match": self.match}

    def drafter(self, trace):
        per_seq = self.host_us * 1e-6
        return lambda n, ctx, depth, tree, fresh, first: Cost(time=per_seq * n, flops=0.0, bytes=0.0, compute_time=0.0, memory_time=0.0)
