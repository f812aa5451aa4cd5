"""Seeded prompt tokens for random-weight models.

A random model has no tokenizer and no text, so a request's prompt is drawn from a stream that
depends only on (trace seed, request id): the same request gets the same prompt in every scheme,
every sweep point and every run, and its length is the workload's (`Request.prompt_tokens`).

Tokens are uniform over the vocabulary, except that with probability `repeat` a token restarts a
copy of an earlier stretch of the prompt (a crude stand-in for the repetition of real text, so
that prompt lookup has something to find in the prompt itself).
"""
from __future__ import annotations

import numpy as np

_TAG = 0x9E3779B1  # separates this stream from any other use of the trace seed


def prompt_tokens(seed: int, request_id: int, length: int, vocab: int, repeat: float = 0.05) -> list[int]:
    """`length` token ids in [0, vocab) for one request, deterministic in (seed, request_id)."""
    if length < 0 or vocab < 1:
        raise ValueError(f"need length >= 0 and vocab >= 1, got {length}, {vocab}")
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), int(request_id), _TAG]))
    out = rng.integers(0, vocab, size=length).tolist()
    if length > 8 and repeat > 0:
        i = 4
        while i < length:
            if rng.random() < repeat:
                span = int(rng.integers(2, 9))
                src = int(rng.integers(0, i - 1))
                for j in range(min(span, length - i, i - src)):
                    out[i + j] = out[src + j]
                i += span
            else:
                i += 1
    return out
