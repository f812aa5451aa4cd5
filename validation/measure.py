"""Acceptance as the engine measured it, in the simulator's forms (sim/profiles.py): pure
functions over the engine's counts.

* chains: per-depth rates from (drafted depth, accepted) counts;
* static trees: rank_depth from (depth, rank) counts: at temperature 0 the target's token at each
  depth along the accepted path, and its rank among the drafter's candidates there;
* EAGLE-2 dynamic trees: a `confidence` model whose top-1 mean is solved so that the simulator's
  tree library gives the measured tokens per step (validation/fit_profiles.py).
"""
from __future__ import annotations


def per_depth_rates(hist: dict[tuple[int, int], int]) -> tuple[list[float], int]:
    """Chain acceptance rates from (drafted depth, accepted) counts; depth j's rate is estimated
    over the steps that drafted at least j tokens and accepted the first j - 1."""
    max_d = max((d for d, _ in hist), default=0)
    rates, samples = [], sum(hist.values())
    for j in range(1, max_d + 1):
        reach = sum(n for (d, a), n in hist.items() if d >= j and a >= j - 1)
        ok = sum(n for (d, a), n in hist.items() if d >= j and a >= j)
        rates.append(ok / reach if reach else (rates[-1] if rates else 0.0))
    return rates, samples


def rank_rows(ranks: dict[tuple[int, int], int], max_rank: int) -> list[list[float]]:
    """rank_depth rows from (depth, rank) counts: row d, column r = P(the target's token is the
    drafter's r-th candidate at depth d | the path above it accepted); rank max_rank = none."""
    rows = []
    for d in range(1, max((k[0] for k in ranks), default=0) + 1):
        total = sum(n for (dd, _), n in ranks.items() if dd == d)
        if not total:
            break
        rows.append([ranks.get((d, r), 0) / total for r in range(max_rank)])
    return rows


def accepted_histogram(hist: dict[tuple[int, int], int]) -> dict[int, int]:
    """Verified steps by drafts accepted."""
    out: dict[int, int] = {}
    for (_, a), n in hist.items():
        out[a] = out.get(a, 0) + n
    return dict(sorted(out.items()))


def mean_tokens(hist: dict[tuple[int, int], int]) -> float:
    """Tokens per verified step (accepted drafts + the one the target samples)."""
    n = sum(hist.values())
    return 1.0 + sum(a * c for (_, a), c in hist.items()) / n if n else 1.0
