"""What every model-based drafter shares: the plan it hands the scheduler, the policy's depth,
draft sampling, and the target features it is fed after each step.

The runner (engine/runner.py) drives a drafter through three calls besides the scheduler's
`plan(seqs)`:
* `observe(seq_id, start, hidden)`: the target's features (after its final norm) of the
  positions it committed this step, start .. start + m - 1 (prefill chunks, the last sampled
  token, the accepted drafts);
* `drop(seq_id)`: the sequence finished or was preempted (its slots go back to the pool; a
  preempted one recomputes and is observed again from position 0).
The target's features of a sequence are kept from the first position its drafters have not
consumed yet (`Features`).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable

import torch

from engine.sampling import warp
from sim import trees as T

RANKS = 10  # ranked candidates a drafter records per drafted node (per-rank acceptance)


@dataclass(frozen=True)
class DraftPlan:
    """One sequence's drafts for one step: the scheduler reads `parents`, the runner verifies
    `tokens` (node order) against the target."""

    parents: tuple[int, ...]
    tokens: tuple[int, ...]
    probs: torch.Tensor | None = None  # (K, V) a sampled chain's draft distributions; None: point masses
    cands: dict[int, list[int]] = field(default_factory=dict)  # node (-1: root) -> its ranked candidates
    # node -> the drafter's probabilities of those candidates (EAGLE-2: engine/confidence_log.py)
    cand_probs: dict[int, list[float]] = field(default_factory=dict)
    cut: bool = False  # drafted shallower than the step's depth: the sequence's end is nearer

    @property
    def depth(self) -> int:
        return max(T.depths(self.parents))


class Features:
    """Rows of per-position features of one sequence, from position `start` on."""

    __slots__ = ("start", "rows")

    def __init__(self, start: int, rows: torch.Tensor):
        self.start, self.rows = start, rows  # rows (m, H)

    @property
    def end(self) -> int:
        return self.start + self.rows.shape[0]

    def append(self, start: int, rows: torch.Tensor) -> None:
        assert start == self.end, f"features for position {start}, expected {self.end}"
        self.rows = torch.cat([self.rows, rows]) if self.rows.shape[0] else rows

    def take(self, a: int, b: int) -> torch.Tensor:
        assert self.start <= a <= b <= self.end, f"features [{a}, {b}) not within [{self.start}, {self.end})"
        return self.rows[a - self.start:b - self.start]

    def drop_before(self, p: int) -> None:
        k = min(max(0, p - self.start), self.rows.shape[0])
        self.rows, self.start = self.rows[k:], self.start + k


def engine_policy(scheme, trace):
    """The scheme's depth policy as the simulator builds it: `goodput` prices depths with the
    simulator's cost model on the trace's hardware (a measured profile, for the engine) and the
    scheme's acceptance model, which it therefore needs."""
    if scheme.policy != "goodput":
        return scheme.policy
    from sim.speculation import Speculator
    if trace is None:
        raise ValueError("the goodput policy needs the trace (hardware and model) to price steps")
    return Speculator(scheme, trace, trace.seed).policy


@dataclass
class DraftContext:
    """What the runner hands a drafter."""

    trace: object  # the TraceSpec as run (its model is the engine's)
    tokens: dict  # seq id -> prompt + generated token ids
    index: Callable[[int], torch.Tensor]  # seq id -> its committed target slots (n,) int64
    temperature: float
    generator: torch.Generator
    rows: int  # most sequences in a step
    page_size: int
    device: torch.device


class ModelDrafter:
    """Base: the depth comes from the scheme's policy (the simulator's code), never past the
    sequence's remaining output - 1."""

    wants_features = True

    def __init__(self, scheme, ctx: DraftContext):
        self.scheme, self.ctx, self.policy = scheme, ctx, engine_policy(scheme, ctx.trace)
        self.feats: dict[int, Features] = {}
        self.depth = 0

    # ---- runner hooks ------------------------------------------------------------------------
    def observe(self, seq_id: int, start: int, hidden: torch.Tensor) -> None:
        f = self.feats.get(seq_id)
        if f is None:
            self.feats[seq_id] = Features(start, hidden)
        else:
            f.append(start, hidden)

    def drop(self, seq_id: int) -> None:
        self.feats.pop(seq_id, None)

    # ---- the scheduler's call ----------------------------------------------------------------
    def plan(self, seqs) -> list:
        if not seqs:
            return []
        ctx = sum(s.computed for s in seqs) / len(seqs)
        d = self.depth = self.policy.choose(len(seqs), ctx)
        ks = [min(d, s.remaining - 1) for s in seqs]
        live = [i for i, k in enumerate(ks) if k > 0]
        out: list = [None] * len(seqs)
        if live:
            for i, plan in zip(live, self.draft([seqs[i] for i in live], [ks[i] for i in live])):
                out[i] = replace(plan, cut=True) if plan is not None and ks[i] < d else plan
        return out

    def draft(self, seqs, ks: list[int]) -> list[DraftPlan | None]:
        raise NotImplementedError

    # ---- helpers -----------------------------------------------------------------------------
    def pick(self, logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """logits (B, V) -> (tokens (B,), the distributions they were drawn from (B, V) or None
        when greedy)."""
        if self.ctx.temperature == 0:
            return logits.argmax(-1), None
        p = warp(logits, self.ctx.temperature)
        return torch.multinomial(p, 1, generator=self.ctx.generator).squeeze(1), p
