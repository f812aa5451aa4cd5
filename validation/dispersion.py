"""How far apart requests' acceptance really is, once one realization's own noise is taken off.

The engine's measured acceptance gives each request its own form (validation.measure.grouped_profile),
fitted to that request's counts. Those counts are one realization: a request of 64 tokens verifies
12-22 steps, and its tokens per step carry the noise of that many draws. The simulator then draws
every step afresh from the fitted form, adding a second helping of that noise on top of the first.
Its requests spread more than the engine's did: in 0.44.0's comparison at concurrency 1 the EAGLE
chain's steps per request had a standard deviation of 3.44 across requests against the engine's
3.17 (the tree's 1.17 against 0.97), and a run's slowest request, which sets a run's TPOT p99,
took 23 steps against 22 (16 against 15), so the simulator's per-run TPOT p99 read +7% to +18%
long for those two schemes at concurrency 1 and 4.

The mechanism, the variance-matching form of empirical Bayes (Louis 1984, "Estimating a population
of parameter values using Bayes and empirical Bayes methods", JASA 79:393): the spread of the
requests' measured tokens per step, V, is the spread of their true rates, T, plus the mean noise
variance of one realization, S = mean(s_i^2 / n_i) (s_i^2 the variance of request i's tokens per
step, n_i its steps in one realization). T = max(0, V - S), and each request's deviation from the
pooled rate is scaled by lambda = sqrt(T / V), so the forms spread by T and the simulator's draws
add S back. A request keeps its place in the order; the pooled mean is kept.

The counts are shrunk, not the forms: request i's counts become lambda x its own plus
(1 - lambda) x its units' worth of the pooled counts (with a factor per request, the target
below), which scales the deviation of its counts' tokens per step by exactly lambda; the forms fitted to them (chain rates, tree ranks, EAGLE-2's
confidence) follow, the tree's and EAGLE-2's nearly (their tokens per step is not linear in them).

One factor for all of a scheme's requests (0.45.0, `by_request=False`) shrinks the slowest as much
as the rest, though they take the most steps and vary least a step, so their own noise is the
smallest: in 0.45.0's comparisons at concurrency 32, where a closed batch lasts as long as its
slowest slots, the simulator's slowest request took 1-4 steps fewer than the engine's in 7 of 8
schemes. Since 0.46.0 each request takes its own factor, lambda_i = sqrt(T / (T + s_i^2 / n_i)):
its measured deviation's expected square is T + s_i^2 / n_i, so the shrunk one's is T, each
request's alone (s_i^2 read with one more unit at the requests' mean variance:
`request_factors`; validation/results/cpu-epyc-zen3/0.45.0/lambda_by_request.txt: 0.97-0.98 for
prompt lookup's slowest requests against a common 0.92). The factors differ, so the requests are
moved toward the pooled counts weighted by what each gives up, sum (1 - lambda_j) c_j over
sum (1 - lambda_j) u_j a unit: the pooled counts are kept exactly, and with equal factors this is
the pooled counts' own rate.

At temperature 0 the engine's runs repeat one realization: a request verified in every pass of
every run is still one draw of its noise. `realizations` counts the distinct ones (as passes with
different counts, weighted: (sum c)^2 / sum c^2 for c passes of each distinct one).
"""
from __future__ import annotations

import math
from collections import Counter


def signature(hist: dict, tries: tuple[int, int] | None = None) -> tuple:
    """A pass's counts of one request, hashable: passes with equal signatures repeat one realization."""
    return tuple(sorted(hist.items())), tries


def realizations(passes: Counter) -> float:
    """Effective independent realizations among a request's passes (signature -> passes with it)."""
    total, squares = sum(passes.values()), sum(c * c for c in passes.values())
    return total * total / squares if squares else 1.0


def step_moments(hist: dict[tuple[int, int], float], units: float) -> tuple[float, float]:
    """(mean, variance) of tokens per unit: `hist` (drafted depth, accepted) counts; `units` the
    sequence-steps they come from (more than the counts where some steps drafted nothing: those
    give one token)."""
    n = float(units)
    if n <= 0:
        return 1.0, 0.0
    s1 = sum(a * c for (_, a), c in hist.items())
    s2 = sum(a * a * c for (_, a), c in hist.items())
    mean = s1 / n
    return 1.0 + mean, max(0.0, s2 / n - mean * mean)


def spread_and_noise(requests: list[tuple[float, float, float]]) -> tuple[float, float] | None:
    """(V, S) from (tokens per unit, variance per unit, units in one realization) of each request:
    V the requests' spread (sample variance) of tokens per unit, S their mean noise of one
    realization (variance over units). None with fewer than two requests that have units."""
    rows = [(t, v, n) for t, v, n in requests if n > 0]
    if len(rows) < 2:
        return None
    mean = sum(t for t, _, _ in rows) / len(rows)
    spread = sum((t - mean) ** 2 for t, _, _ in rows) / (len(rows) - 1)
    return spread, sum(v / n for _, v, n in rows) / len(rows)


def shrink_factor(requests: list[tuple[float, float, float]]) -> tuple[float, float, float]:
    """(lambda, V, S), one factor for every request (`spread_and_noise`):
    lambda = sqrt(max(0, V - S) / V) in [0, 1] (1 with fewer than two requests or no spread)."""
    got = spread_and_noise(requests)
    if got is None:
        return 1.0, 0.0, 0.0
    spread, noise = got
    if spread <= 0:
        return 1.0, spread, noise
    return math.sqrt(max(0.0, spread - noise) / spread), spread, noise


def request_factors(requests: list[tuple[float, float, float]]) -> tuple[list[float], float, float]:
    """([lambda_i], V, S), a factor for each request: lambda_i = sqrt(T / (T + v_i / n_i)) with
    T = max(0, V - S), so each shrunk deviation's expected square is T. A request's own variance
    per unit v_i is read as if one more unit had the requests' mean variance, (n_i v_i + mean v) /
    (n_i + 1): a request whose every step gave the same tokens measured no noise, yet its rate
    is one realization's too. 1 for a request without units, and for all with fewer than two
    requests or no spread."""
    got = spread_and_noise(requests)
    if got is None or got[0] <= 0:
        spread, noise = got or (0.0, 0.0)
        return [1.0] * len(requests), spread, noise
    spread, noise = got
    true = max(0.0, spread - noise)
    with_units = [v for _, v, n in requests if n > 0]
    prior = sum(with_units) / len(with_units)
    out = []
    for _, v, n in requests:
        own = (n * v + prior) / (n + 1.0) / n if n > 0 else 0.0
        out.append(math.sqrt(true / (true + own)) if n > 0 and true + own > 0 else 1.0)
    return out, spread, noise


def shrunk(requests: dict[int, tuple[dict, dict]], passes: dict[int, Counter],
           tries: dict[int, tuple[float, float]] | None = None, uncut: dict[int, dict] | None = None,
           by_request: bool = True):
    """(requests, tries, uncut, record) with each request's counts moved toward the pooled counts
    so its tokens per unit's deviation is scaled by its factor (`request_factors`, or with
    by_request=False one `shrink_factor` for all): counts_i' = lambda_i x counts_i +
    (1 - lambda_i) x units_i x the target a unit, the target sum_j (1 - lambda_j) counts_j /
    sum_j (1 - lambda_j) units_j (the pooled counts kept). A unit is a verified step, or with
    `tries` (prompt lookup) a sequence-step that could draft. `passes`: request -> Counter of its
    passes' `signature`s (how many of its passes repeated one realization). `record` for the
    acceptance file: {shrink (the requests' mean factor), spread, noise, by_request, factors
    (request -> its factor)}."""
    uncut = uncut or {}
    ids = sorted(tries) if tries is not None else sorted(requests)
    units = {i: float(tries[i][0]) if tries is not None else float(sum(requests.get(i, ({}, {}))[0].values()))
             for i in ids}
    rows = []
    for i in ids:
        mean, var = step_moments(requests.get(i, ({}, {}))[0], units[i])
        seen = passes.get(i) or Counter({None: 1})
        rows.append((mean, var, units[i] * realizations(seen) / sum(seen.values())))
    if by_request:
        factors, spread, noise = request_factors(rows)
    else:
        lam, spread, noise = shrink_factor(rows)
        factors = [lam] * len(rows)
    lam = dict(zip(ids, factors))
    kept = [i for i in ids if units[i] > 0]
    record = {"shrink": round(sum(lam[i] for i in kept) / len(kept), 4) if kept else 1.0,
              "spread": round(spread, 6), "noise": round(noise, 6), "by_request": by_request,
              "factors": {str(i): round(lam[i], 4) for i in kept}}
    weight = {i: 1.0 - lam[i] for i in kept}
    given = sum(weight[i] * units[i] for i in kept)  # the units the factors give up
    if given <= 0:
        return requests, tries, uncut, record
    target_h = weighted(((requests.get(i, ({}, {}))[0], weight[i]) for i in kept), given)
    target_r = weighted(((requests.get(i, ({}, {}))[1], weight[i]) for i in kept), given)
    target_u = weighted(((uncut.get(i, {}), weight[i]) for i in kept), given)
    drafted = sum(weight[i] * tries[i][1] for i in kept) / given if tries is not None else 0.0
    out_req, out_tries, out_uncut = {}, dict(tries) if tries is not None else None, dict(uncut)
    for i in kept:
        share = weight[i] * units[i]
        h, r = requests.get(i, ({}, {}))
        out_req[i] = (mix(h, target_h, lam[i], share), mix(r, target_r, lam[i], share))
        if i in uncut or target_u:
            out_uncut[i] = mix(uncut.get(i, {}), target_u, lam[i], share)
        if tries is not None:
            n, d = tries[i]
            out_tries[i] = (n, lam[i] * d + share * drafted)
    for i in requests:  # requests without units (drafted nothing; no step could draft): as they were
        out_req.setdefault(i, requests[i])
    return out_req, out_tries, out_uncut, record


def weighted(parts, units: float) -> dict:
    """sum of weight x counts over (counts, weight) `parts`, a unit's worth (divided by `units`)."""
    out: dict = {}
    for counts, w in parts:
        for k, n in counts.items():
            out[k] = out.get(k, 0.0) + w * n / units
    return out


def mix(counts: dict, pooled: dict, keep: float, share: float) -> dict:
    """keep x counts + share x pooled, key by key."""
    out = {k: keep * n for k, n in counts.items()}
    for k, n in pooled.items():
        out[k] = out.get(k, 0.0) + share * n
    return out

