"""Acceptance as the engine measured it, in the simulator's forms (sim/profiles.py): pure
functions over the engine's counts.

* chains: per-depth rates from (drafted depth, accepted) counts;
* static trees: rank_depth from (depth, rank) counts: at temperature 0 the target's token at each
  depth along the accepted path, and its rank among the drafter's candidates there;
* EAGLE-2 dynamic trees: a `confidence` model whose top-1 mean is solved so that the simulator's
  tree library gives the measured tokens per step (validation/fit_profiles.py);
* requests that differ: a `mixture` of those forms, one per group of requests with similar
  tokens per step (`grouped_profile`).
"""
from __future__ import annotations

import math

from sim.profiles import MAX_COMPONENTS

RANKS = 10  # candidates per drafted node the engine records (engine/drafting/base.py RANKS)
# requests per group of a measured mixture: the groups' count grows with the requests (up to
# sim.profiles.MAX_COMPONENTS), so the slowest requests, which a closed batch waits for, keep
# their own acceptance (64 requests cut into quartiles averaged the slowest 16: at concurrency 32
# the simulator's runs took 4-15% fewer steps than the engine's; in groups of 4 prompt lookup's
# still 9%, where the engine's slowest request, 54 steps, ran alone for its last 14; one request
# a group: -0.7%)
GROUP_SIZE = 1


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


def drafted_counts(result) -> dict[tuple[int, int], int]:
    """A run's (drafted depth, accepted) counts with every decode step that drafted nothing (no
    prompt-lookup match) counted as a draft rejected at its first token, since the simulator's
    schemes draft at every step. `result` is a sim.simulator.RunResult."""
    counts = dict(result.acceptance or {})
    undrafted = result.decode_seq_steps - sum(counts.values())
    if counts and undrafted > 0:
        deepest = max(d for d, _ in counts)
        counts[(deepest, 0)] = counts.get((deepest, 0), 0) + undrafted
    return counts


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


def profile(scheme, hist: dict, ranks: dict, uncut: dict | None = None, shape: dict | None = None) -> dict:
    """The simulator's acceptance form for what the engine measured of `scheme`. EAGLE-2's
    confidence model (`confidence_fit`) is fitted to the tokens per step of `uncut` (the steps
    whose tree the sequence's end did not cut short; else all of `hist`): the library's trees are
    whole, and the simulator cuts them near a request's end as the engine does (fitted over every
    step, at concurrency 4 the cut 7% at 3.9 tokens a step against 5.4, the simulator's EAGLE-2
    accepted 3-4% fewer drafts than the engine's at every concurrency)."""
    if scheme.name == "eagle2":
        return {"confidence": confidence_fit(scheme, mean_tokens(uncut or hist), shape)}
    if scheme.name in ("medusa", "eagle") and getattr(scheme, "tree_nodes", None) and ranks:
        return {"rank_depth": [[math.floor(x * 1e5) / 1e5 for x in row] for row in rank_rows(ranks, RANKS)]}
    rates, _ = per_depth_rates(hist)
    return {"per_depth": [round(r, 5) for r in rates]}


def confidence_fit(scheme, tau: float, shape: dict | None) -> dict:
    """EAGLE-2's confidence fields for `tau` tokens per step. With a measured `shape`
    (validation.confidence.group_shape: top-1 mean and concentration, shares, the run's
    maximum-likelihood sharpness) the top-1 mean is solved for tau, the rest kept as measured;
    where tau lies below what the least top-1 mean (0.01) gives, the sharpness is solved instead
    at the measured top-1 mean (its range's low end where even that falls short). Without a
    shape, the top-1 mean at the model's other defaults."""
    from validation.fit_profiles import LEAST_TOP1, SHARPNESS_RANGE, confidence_tau, fit_confidence, fit_sharpness
    args = (scheme.max_depth, scheme.topk, scheme.tree_tokens)
    if not shape:
        return {"top1_mean": round(fit_confidence(tau, *args), 4)}
    kw = {"top1_concentration": shape["top1_concentration"], "shares": tuple(shape.get("shares", ())),
          "vocab": vocab_of(scheme)}
    least = confidence_tau(LEAST_TOP1, *args, sharpness=shape["sharpness"], **kw)
    if tau >= least:
        return {**shape, "top1_mean": round(fit_confidence(tau, *args, at_least=least, sharpness=shape["sharpness"],
                                                           **kw), 4)}
    gamma = fit_sharpness(tau, shape["top1_mean"], *args, **kw)
    return {**shape, "sharpness": round(gamma if gamma is not None else SHARPNESS_RANGE[0], 4)}


def vocab_of(scheme) -> int:
    """The drafter's vocabulary (EAGLE-2's head; 0 where the scheme names none)."""
    return getattr(getattr(scheme, "head", None), "vocab", 0) or 0


def histogram_distance(a: dict[str, int], b: dict[str, int]) -> float:
    """Total-variation distance between two histograms of accepted drafts per step."""
    na, nb = sum(a.values()), sum(b.values())
    if not na or not nb:
        return float("nan")
    keys = set(a) | set(b)
    return 0.5 * sum(abs(a.get(k, 0) / na - b.get(k, 0) / nb) for k in keys)


def add_counts(dst: dict, src: dict) -> dict:
    """dst += src, key by key (counts); returns dst."""
    for k, n in src.items():
        dst[k] = dst.get(k, 0) + n
    return dst


def merge_counts(counts) -> dict:
    out: dict = {}
    for c in counts:
        add_counts(out, c)
    return out


def grouped_profile(scheme, requests: dict[int, tuple[dict, dict]], size: int = GROUP_SIZE,
                    tries: dict[int, tuple[int, int]] | None = None, uncut: dict[int, dict] | None = None,
                    confidence: dict | None = None, passes: dict | None = None, by_request: bool = True) -> dict:
    """The simulator's form for requests whose acceptance differs (prompts differ in how
    predictable they are): `requests` maps a request to its ((drafted depth, accepted) counts,
    (depth, rank) counts). The requests that drafted, ordered by their tokens per verified step,
    are cut into groups of `size` (as equal as they divide), and each group's `profile` weighs
    its share of them and names them: {mixture: [{weight, <form>, request_ids}, ...]}, so the
    simulator's run of the same requests gives each its own group's acceptance (a closed batch
    ends with its slowest slot: drawn, the simulator's prompt lookup at concurrency 32 took 14%
    fewer steps than the engine's). With fewer than two groups' worth, the pooled `profile`.

    `tries` (prompt lookup: request -> (sequence-steps that could draft, of which drafted)): the
    requests that could draft are ordered instead by their tokens per such step (a step without
    a match gives one), and each group gets its own `match`, the share of its steps that drafted
    (0.42-0.94 by request at concurrency 32; one pooled rate had the simulator's runs end 9.5%
    sooner than the engine's). A group that never drafted takes the pooled form.

    `uncut` (request -> (drafted depth, accepted) counts of its steps that the sequence's end did
    not cut short): what `profile` fits EAGLE-2's confidence to. `confidence` (request ->
    engine.confidence_log.ConfidenceLog): EAGLE-2's measured shape (validation.confidence), the
    run's sharpness and shares with each group's own top-1 concentration.

    `passes` (request -> Counter of validation.dispersion.signature over the passes that ran it):
    the counts are one realization's noise on top of each request's own rate, which the
    simulator's draws add again; with `passes`, each request's counts are first moved toward the
    pooled by validation.dispersion.shrunk (each by its own factor; by_request=False: one factor
    for all, as 0.45.0), and the result records it under `dispersion`. Without, the counts are
    taken as they are."""
    uncut = uncut or {}
    record = None
    if passes is not None:
        from validation.dispersion import shrunk
        requests, tries, uncut, record = shrunk(requests, passes, tries, uncut, by_request)
    run, logs = None, confidence or {}
    if logs:
        from validation.confidence import group_shape, merged, run_shape
        run = run_shape(merged(logs.values()), scheme.topk, vocab_of(scheme))

    def shape(ids) -> dict | None:
        return group_shape(merged(logs[i] for i in ids if i in logs), run) if run else None
    # ordered by tokens per unit to 9 places, then by id: equal counts summed in another order
    # (shrunk counts read back from a counts file) differ in the last bits, not in their place
    if tries is None:
        order = sorted((round(mean_tokens(h), 9), rid) for rid, (h, _) in requests.items() if h)
    else:
        order = sorted((round(tokens_per_try(requests.get(rid, ({}, {}))[0], n, d), 9), rid)
                       for rid, (n, d) in tries.items() if n)
    groups = min(len(order) // max(1, size), MAX_COMPONENTS)

    def pooled() -> dict:  # every request's counts together (EAGLE-2's is a fit: only where needed)
        return profile(scheme, merge_counts(h for h, _ in requests.values()), merge_counts(r for _, r in requests.values()),
                       merge_counts(uncut.values()), run)
    if groups < 2:
        return pooled()
    n = len(order)
    bounds = [round(i * n / groups) for i in range(groups + 1)]
    out = []
    for a, b in zip(bounds, bounds[1:]):
        ids = [rid for _, rid in order[a:b]]
        hist = merge_counts(requests[i][0] for i in ids if i in requests)
        form = profile(scheme, hist, merge_counts(requests[i][1] for i in ids if i in requests),
                       merge_counts(uncut.get(i, {}) for i in ids), shape(ids)) if hist else pooled()
        if tries is not None:
            tried, drafted = (sum(tries[i][k] for i in ids) for k in (0, 1))
            form = {**form, "match": round(drafted / tried, 6)}
        out.append({"weight": round((b - a) / n, 6), **form, "request_ids": sorted(ids)})
    return {"mixture": out, **({"dispersion": record} if record else {})}


def tokens_per_try(hist: dict[tuple[int, int], int], tried: int, drafted: int) -> float:
    """Tokens per sequence-step that could draft: a drafted step gives its accepted drafts + 1
    (mean_tokens over `hist`, the drafted steps' counts), a step without a match one."""
    return 1.0 + (mean_tokens(hist) - 1.0) * drafted / tried if tried else 1.0
