"""Tried in 0.47.0 and not kept: each request's own noise read through the scheme's mean-variance
relation instead of at the requests' mean variance (validation/dispersion.py's request_factors).

0.46.0 reads request i's variance of tokens per unit as if it had one more unit at the requests'
mean variance. Here: a weighted least-squares quadratic v(t) of the requests' variances on their
tokens per unit (weights their units), and each request's variance moved toward v(t_i) by a
normal-normal shrink of variances: its sampling variance w_i = (m4_i - v_i^2) / n_i (m4 its fourth
central moment), the requests' scatter about the relation tau = mean (v_i - v(t_i))^2 - mean w_i
(at least 0), v_i* = (tau v_i + w_i v(t_i)) / (tau + w_i). The factor is then 0.46.0's,
sqrt(T / (T + v_i* / n_i)).

Run from the repository root with the project's environment on a comparison folder that kept its
counts (0.46.0's), as `python -m validation reprice` with this factor in place:

  python validation/results/cpu-epyc-zen3/0.47.0/relation_prior.py reprice DIR --hardware DIR/measured-hardware.yaml --out OUT --refit request
  python validation/results/cpu-epyc-zen3/0.47.0/relation_prior.py side DIR/comparison.json OUT/comparison.json
"""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))
import validation.dispersion as D  # noqa: E402


def fourth(hist: dict, units: float) -> float:
    """Fourth central moment of accepted tokens per unit (units without a count accepted 0)."""
    n = float(units)
    if n <= 0:
        return 0.0
    mean = sum(a * c for (_, a), c in hist.items()) / n
    rest = n - sum(hist.values())
    return (sum(c * (a - mean) ** 4 for (_, a), c in hist.items()) + rest * mean ** 4) / n


def relation(rows):
    """v(t): weighted least squares of variance on (1, t, t^2), lower degree with few rows."""
    t, v, n = (np.array(x, dtype=float) for x in zip(*rows))
    deg = min(2, len(rows) - 2) if len(rows) > 2 else 0
    sw = np.sqrt(n)
    coef = np.linalg.lstsq(np.vander(t, deg + 1) * sw[:, None], v * sw, rcond=None)[0]
    return lambda x: max(1e-9, float(np.polyval(coef, x)))


def factors(requests, fourths):
    """request_factors with each request's variance read through the relation."""
    got = D.spread_and_noise(requests)
    if got is None or got[0] <= 0:
        spread, noise = got or (0.0, 0.0)
        return [1.0] * len(requests), spread, noise
    spread, noise = got
    rows = [(t, v, n) for t, v, n in requests if n > 0]
    m4 = [m for m, (_, _, n) in zip(fourths, requests) if n > 0]
    fit = relation(rows)
    samp = [max(0.0, m - v * v) / n for (t, v, n), m in zip(rows, m4)]
    tau = max(0.0, sum((v - fit(t)) ** 2 for t, v, _ in rows) / len(rows) - sum(samp) / len(samp))
    true = max(0.0, spread - noise)
    out, it = [], iter(zip(rows, samp))
    for _, _, n in requests:
        if n <= 0:
            out.append(1.0)
            continue
        (t, v, n), w = next(it)
        keep = tau / (tau + w) if tau + w > 0 else 0.0
        own = (keep * v + (1 - keep) * fit(t)) / n
        out.append(math.sqrt(true / (true + own)) if true + own > 0 else 1.0)
    return out, spread, noise


def patched_reprice(argv):
    seen = {}
    moments = D.step_moments

    def step_moments(hist, units):
        m, v = moments(hist, units)
        seen[(m, v)] = fourth(hist, units)
        return m, v
    D.step_moments = step_moments
    D.request_factors = lambda rows: factors(rows, [seen.get((t, v), 3 * v * v) for t, v, _ in rows])
    from validation.__main__ import main
    return main(argv)


def side(a_path, b_path):
    """Each entry's throughput, TPOT p50 / p99 and steps errors: 0.46.0's factor / the relation's."""
    a, b = (json.loads(Path(p).read_text())["runs"] for p in (a_path, b_path))
    kb = {(r["label"], r["concurrency"]): r for r in b}
    keys = ("throughput_tok_s", "tpot_p50", "tpot_p99", "steps")
    print("scheme      conc | " + " | ".join(f"{k:>13}" for k in keys))
    for r in a:
        s = kb[(r["label"], r["concurrency"])]
        print(f"{r['label']:11s} {r['concurrency']:4d} | "
              + " | ".join(f"{r['errors'][k] * 100:+5.1f}/{s['errors'][k] * 100:+5.1f}" for k in keys))


if __name__ == "__main__":
    if sys.argv[1] == "side":
        side(*sys.argv[2:4])
    else:
        sys.exit(patched_reprice(sys.argv[1:]))
