"""Prompt lookup decoding (Saxena 2023, "Prompt Lookup Decoding"; vLLM's n-gram proposer): the
drafter of the `ngram` scheme. No model runs.

For a sequence's tokens (prompt + generated), take the longest suffix n-gram (n = max_ngram down
to 1) that also occurs earlier; at its most recent earlier occurrence, the tokens that followed
are the proposal, up to K of them. The continuation may run into the proposal itself (a match
one period back in a loop proposes the loop again), so a repeating tail always yields K tokens.

`NGramPlanner` is the engine's `sim.scheduler.Planner` for the scheme: once per step the
scheduler hands it the decoding sequences; the scheme's policy (as the simulator builds it) picks the
depth from the batch size and mean context, never drafting past `remaining - 1`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from sim import trees as T


def propose(tokens: Sequence[int], k: int, max_ngram: int) -> list[int]:
    """Up to k draft tokens continuing `tokens`; [] when no suffix n-gram recurs."""
    L = len(tokens)
    if k < 1 or L < 2:
        return []
    arr = np.asarray(tokens, dtype=np.int64)
    for n in range(min(max_ngram, L - 1), 0, -1):
        # windows arr[i:i+n] for i in [0, L-n-1]: every occurrence that ends before the last token
        m = arr[:L - n] == arr[L - n]
        for j in range(1, n):
            m &= arr[j:L - n + j] == arr[L - n + j]
        hits = np.flatnonzero(m)
        if hits.size:
            start = int(hits[-1]) + n  # the token after the most recent earlier occurrence
            out = list(tokens[start:start + k])
            while len(out) < k:  # ran into the end: continue from the proposal itself
                i = start + len(out) - L
                out.append(out[i])
            return out
    return []


@dataclass(frozen=True)
class ChainPlan:
    """A drafted chain for one sequence: what the scheduler reads (`parents`) and the engine
    verifies (`tokens`)."""

    parents: tuple[int, ...]
    tokens: tuple[int, ...]


class NGramPlanner:
    """sim.scheduler.Planner for prompt lookup. `tokens` maps a sequence id to its token list
    (prompt + generated), kept by the engine."""

    def __init__(self, scheme, tokens: Mapping[int, Sequence[int]], trace=None):
        from engine.drafting.base import engine_policy
        self.policy = engine_policy(scheme, trace)
        self.max_ngram = scheme.max_ngram
        self.tokens = tokens
        self.depth = 0

    def plan(self, seqs) -> list[ChainPlan | None]:
        if not seqs:
            return []
        ctx = sum(s.computed for s in seqs) / len(seqs)
        d = self.depth = self.policy.choose(len(seqs), ctx)
        out: list[ChainPlan | None] = []
        for s in seqs:
            k = min(d, s.remaining - 1)
            prop = propose(self.tokens[s.id], k, self.max_ngram) if k > 0 else []
            out.append(ChainPlan(T.chain(len(prop)), tuple(prop)) if prop else None)
        return out
