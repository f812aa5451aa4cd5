"""`ngram`: prompt lookup. The longest recent n-gram match in the sequence proposes the next K
tokens; no model runs, so the drafter costs host time only: `host_us` per sequence where the
scheme gives it, else the device's measured `ngram_call_us` per step and `ngram_seq_us` per
sequence, charged for every sequence looked up, matched or not (validation.calibrate; on the
fifth VM the engine's planner took 93 us a step at one sequence and 149 us at 3.6, where a
tight loop runs a lookup in 8-15 us), else 20 us per sequence. `match`
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


DEFAULT_HOST_US = 20.0  # per sequence, where neither the scheme nor the device gives prompt lookup's time


@dataclass(frozen=True)
class NGram(SpecScheme):
    name = "ngram"
    prices_tries = True
    max_ngram: int = 3
    host_us: float | None = None  # per sequence; None: the device's measured figures
    match: float = 1.0

    @classmethod
    def from_node(cls, node: Node, model: ModelSpec, base_dir: Path) -> "NGram":
        f, common = parse_common(cls, node, ("ngram", "host_us", "match"), "k", base_dir)
        scheme = cls(max_ngram=f["ngram"].integer(lo=1, hi=64) if "ngram" in f else 3,
                     host_us=f["host_us"].number(lo=0, hi=1e6) if "host_us" in f else None,
                     match=f["match"].number(lo=0, hi=1, lo_open=True) if "match" in f else 1.0, **common)
        need_rank_acceptance(scheme, "an n-gram chain")
        return scheme

    def match_rate(self) -> float:
        return self.match

    def params(self) -> dict:
        return {**super().params(), "ngram": self.max_ngram, "host_us": self.host_us, "match": self.match}

    def drafter(self, trace):
        hw = trace.hardware
        call, per_seq = (0.0, self.host_us * 1e-6) if self.host_us is not None else \
            (hw.ngram_call_s, hw.ngram_seq_s) if hw.ngram_call_s or hw.ngram_seq_s else (0.0, DEFAULT_HOST_US * 1e-6)
        return lambda n, ctx, depth, tree, fresh, first, several: Cost(time=call + per_seq * n, flops=0.0, bytes=0.0,
                                                               compute_time=0.0, memory_time=0.0)
