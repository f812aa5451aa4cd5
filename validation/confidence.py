"""EAGLE-2's confidence model (sim/dyntree.py) from the engine's record of its drafter
(engine/confidence_log.py): pure functions.

* `top1_concentration`: the Beta concentration of the expanded nodes' top-1 probabilities (by
  their moments);
* `rank_shares`: the mean share of the mass beyond the top-1 at each further rank;
* `sharpness`: the γ under which the target's greedy token is child r with probability
  p_r^γ / Σ p^γ (every token of the vocabulary; the mass beyond the top-k spread evenly),
  by maximum likelihood over the picks (the target's rank among each accepted node's children).

A group of requests (validation.measure.grouped_profile) keeps its own top-1 concentration and
the run's shares and sharpness; its top-1 mean is solved for its measured tokens per step
(validation.measure.confidence_fit). Solved that way with the paper's calibrated drafter (γ = 1,
a geometric tail), the family's EAGLE-2 trees came out nearly always 6 deep (98% against the
engine's 56%) and its accepted drafts per step 0.19-0.24 apart in total variation from the
engine's; with the measured shape, 0.043-0.057 at concurrency 1-32. (Keeping each request's
measured top-1 mean and solving its sharpness instead read 0.09-0.11, the sharpness ranging
1.4-16 over the requests.)
"""
from __future__ import annotations

import math

import numpy as np

from engine.confidence_log import ConfidenceLog
from sim.dyntree import Confidence
from validation.fit_profiles import SHARPNESS_RANGE

LEAST_NODES = 20  # expanded nodes below which a group's top-1 moments fall back on the pooled ones


def top1_concentration(log: ConfidenceLog) -> float:
    """a + b of the Beta with the top-1 probabilities' mean and variance (0.1 .. 1e4)."""
    n, s, s2 = log.top1
    if n < 2:
        return Confidence().top1_concentration
    m = s / n
    var = max(s2 / n - m * m, 1e-12)
    return float(min(1e4, max(0.1, m * (1 - m) / var - 1)))


def rank_shares(log: ConfidenceLog, topk: int) -> tuple[float, ...]:
    """Ranks 1..topk-1: the mass there over the mass beyond the top-1, summed over the expanded
    nodes (as far as they were recorded)."""
    n, mass = log.top1[0], log.rank_mass
    rest = n - (mass[0] if mass else 0.0)
    if not n or rest <= 0 or len(mass) < 2:
        return ()
    return tuple(round(m / rest, 6) for m in mass[1:topk])


def pick_loglik(picks: list[tuple[tuple[float, ...], int]], topk: int, vocab: int, gamma: float) -> float:
    """Mean log-probability of the picks under sharpness `gamma` (sim.dyntree.Confidence.accept's
    law: the top-k's probabilities, the rest of the mass spread evenly over the vocab - k others)."""
    logp, idx = _pick_arrays(picks, topk)
    return _loglik(logp, idx, topk, vocab, gamma)


def _pick_arrays(picks, topk: int) -> tuple[np.ndarray, np.ndarray]:
    """(log probabilities (n, topk), -inf where not recorded; the target's rank, topk: beyond)."""
    logp = np.full((len(picks), topk), -np.inf)
    idx = np.full(len(picks), topk, dtype=np.int64)
    for i, (probs, r) in enumerate(picks):
        p = np.asarray(probs[:topk], dtype=float)
        logp[i, :len(p)] = np.log(np.maximum(p, 1e-300))
        if 0 <= r < topk:
            idx[i] = r
    return logp, idx


def _loglik(logp: np.ndarray, idx: np.ndarray, topk: int, vocab: int, gamma: float) -> float:
    others = max(1, vocab - topk)
    beyond = np.clip(1.0 - np.exp(logp).sum(axis=1), 1e-300, 1.0)  # (n,)
    rest = math.log(others) + gamma * (np.log(beyond) - math.log(others))  # log(others x (beyond/others)^γ)
    terms = np.concatenate([gamma * logp, rest[:, None]], axis=1)  # (n, topk + 1)
    top = terms.max(axis=1)
    log_z = top + np.log(np.exp(terms - top[:, None]).sum(axis=1))
    return float((terms[np.arange(len(idx)), idx] - log_z).mean())


def sharpness(picks: list[tuple[tuple[float, ...], int]], topk: int, vocab: int) -> float:
    """The maximum-likelihood γ in SHARPNESS_RANGE (golden-section search on log γ; 1.0 without
    picks)."""
    if not picks:
        return 1.0
    logp, idx = _pick_arrays(picks, topk)
    a, b = (math.log(x) for x in SHARPNESS_RANGE)
    f = lambda x: -_loglik(logp, idx, topk, vocab, math.exp(x))  # noqa: E731
    g = (math.sqrt(5) - 1) / 2
    c, d = b - g * (b - a), a + g * (b - a)
    fc, fd = f(c), f(d)
    for _ in range(40):
        if fc < fd:
            b, d, fd = d, c, fc
            c = b - g * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, d, fd
            d = a + g * (b - a)
            fd = f(d)
    return round(math.exp((a + b) / 2), 4)


def run_shape(pooled: ConfidenceLog, topk: int, vocab: int) -> dict:
    """The confidence fields measured over a run's every request together: the top-1 mean and
    concentration (`group_shape` takes a group's own), the shares, and the sharpness by maximum
    likelihood (the fit of a group's tokens per step solves its own, validation.measure.profile)."""
    n, s, _ = pooled.top1
    shape = {"top1_mean": round(s / n, 4) if n else Confidence().top1_mean, "top1_concentration": round(top1_concentration(pooled), 4),
             "sharpness": sharpness(pooled.picks, topk, vocab)}
    shares = rank_shares(pooled, topk)
    return {**shape, "shares": list(shares)} if shares else shape


def group_shape(log: ConfidenceLog, run: dict) -> dict:
    """`run` (run_shape) with the group's own top-1 mean and concentration where it expanded
    LEAST_NODES nodes at least."""
    n, s, _ = log.top1
    if n < LEAST_NODES:
        return dict(run)
    return {**run, "top1_mean": round(s / n, 4), "top1_concentration": round(top1_concentration(log), 4)}


def merged(logs) -> ConfidenceLog:
    out = ConfidenceLog()
    for log in logs:
        out.merge(log)
    return out
