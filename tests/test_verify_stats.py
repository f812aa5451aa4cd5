"""Statistical tests of the batched torch implementation (engine/verify.py) itself.

Each test draws B = 20,000 independent rows in ONE call (drafts drawn from the toy drafter with
a seeded numpy generator, verification with a seeded torch.Generator, float32 probabilities as in
serving) and compares the emitted tokens with exact laws by Pearson's chi-square test
(scipy.stats.chisquare; cells with expected count < 5 are pooled into one cell):

* "outcomes": the law of the whole emitted record (accepted node path, tokens) against the exact
  law enumerated by tests/verify_exact.py;
* "first token": the first emitted token against the target's root row, directly;
* "conditionals": for every history (accepted nodes and tokens before depth j) the next emitted
  token against the target row at that history; the per-history statistics (independent given
  the history counts) are summed with their degrees of freedom into one chi-square.

False-alarm rate: each chi-square is rejected at alpha = 1e-3 (so a correct implementation fails a
given check with probability 1e-3 for a random seed; about 1.3% for the 13 checks together).
The seeds are fixed, so the outcome is deterministic: a failure means the seed landed in the tail
or the implementation is wrong; a wrong law at these sample sizes gives p-values far below 1e-3.

The p-values are printed (pytest -s) and written to out/verify_stats_pvalues.txt.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy import stats

try:                    # tests/ is a package (tests/__init__.py): import through it
    from tests import strategies as S
    from tests import verify_exact as X
except ImportError:     # tests/ itself on sys.path
    import strategies as S
    import verify_exact as X
from engine import verify as Vf

ALPHA = 1e-3
B = 20_000
REPORT = Path(__file__).resolve().parents[1] / "out" / "verify_stats_pvalues.txt"
_RESULTS: list[str] = []


@pytest.fixture(scope="module", autouse=True)
def _report():
    yield
    if _RESULTS:
        try:
            REPORT.parent.mkdir(parents=True, exist_ok=True)
            REPORT.write_text("\n".join(_RESULTS) + "\n")
        except OSError:
            pass


def _record(name, stat, dof, pval):
    line = f"{name}: chi2={stat:.2f} dof={dof} p={pval:.4g} (alpha={ALPHA:g})"
    print(line)
    _RESULTS.append(line)
    assert pval > ALPHA, line


# --------------------------------------------------------------------------- chi-square helpers

def _pool_cells(obs: np.ndarray, exp: np.ndarray, min_expected: float = 5.0):
    """Pool the cells with expected count < min_expected into one cell (merged with the smallest
    other cell if still too small). Observations in cells of expected count 0 fail outright."""
    zero = exp <= 0
    assert obs[zero].sum() == 0, "sampled an outcome of probability 0"
    obs, exp = obs[~zero], exp[~zero]
    small = exp < min_expected
    o = list(obs[~small])
    e = list(exp[~small])
    if small.any():
        so, se = float(obs[small].sum()), float(exp[small].sum())
        if se < min_expected and e:
            k = int(np.argmin(e))
            so, se = so + o.pop(k), se + e.pop(k)
        o.append(so)
        e.append(se)
    return np.array(o, dtype=float), np.array(e, dtype=float)


def _chisq(obs, exp):
    o, e = _pool_cells(np.asarray(obs, float), np.asarray(exp, float))
    if len(o) < 2:
        return 0.0, 0, 1.0
    e = e * (o.sum() / e.sum())
    res = stats.chisquare(o, e)
    return float(res.statistic), len(o) - 1, float(res.pvalue)


def _outcome_test(name, records, law):
    counts = Counter(records)
    probs = law.outcomes
    keys = sorted(set(counts) | set(probs))
    obs = np.array([counts.get(k, 0) for k in keys])
    exp = np.array([probs.get(k, 0.0) for k in keys]) * len(records)
    _record(f"{name} outcomes", *_chisq(obs, exp))


def _conditional_test(name, records, target_row, V):
    """records: list of (nodes, tokens). target_row(nodes_prefix, tokens_prefix) -> (V,)."""
    hist = defaultdict(lambda: np.zeros(V))
    for nodes, toks in records:
        for j in range(len(toks)):
            hist[(nodes[:j], toks[:j])][toks[j]] += 1
    total_stat, total_dof = 0.0, 0
    for (nodes, toks), obs in hist.items():
        exp = obs.sum() * target_row(nodes, toks)
        stat, dof, _ = _chisq(obs, exp)
        total_stat += stat
        total_dof += dof
    pval = float(stats.chi2.sf(total_stat, total_dof)) if total_dof else 1.0
    _record(f"{name} conditionals ({len(hist)} histories)", total_stat, total_dof, pval)


def _first_token_test(name, records, p_root):
    obs = np.bincount([toks[0] for _, toks in records], minlength=len(p_root))
    _record(f"{name} first token", *_chisq(obs, p_root * len(records)))


def _records(tokens, num, path=None):
    tokens, num = tokens.tolist(), num.tolist()
    path = None if path is None else path.tolist()
    out = []
    for b in range(len(num)):
        n = num[b]
        nodes = tuple(range(n - 1)) if path is None else tuple(path[b][:n - 1])
        out.append((nodes, tuple(tokens[b][:n])))
    return out


# --------------------------------------------------------------------------- fixed cases

def _model(V, seed, prefix_dependent=True, n=4):
    """Pool of n (p, q) pairs: q near p (a realistic drafter) except for the special entries:
    a zero in p, p == q, and a one-hot q on the target's least likely token."""
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.ones(V) * 0.7, size=n)
    p[0, -1] = 0.0                      # a zero in the target
    p /= p.sum(1, keepdims=True)
    q = 0.6 * p + 0.4 * rng.dirichlet(np.ones(V) * 0.7, size=n)
    q[1] = p[1]                         # p == q somewhere
    q[2] = 0.0
    q[2, np.argmin(p[2])] = 1.0         # a one-hot draft on the target's least likely token
    return S.PoolModel(p, q, prefix_dependent, salt=seed)


def _run_chain(case, seed):
    p, q, x = S.chain_batch(case, B, np.random.default_rng(seed))
    f = torch.float32
    tokens, num = Vf.verify_chain(torch.from_numpy(p).to(f),
                                  None if q is None else torch.from_numpy(q).to(f),
                                  torch.from_numpy(x), generator=torch.Generator().manual_seed(seed))
    return _records(tokens, num)


def _run_tree(case, seed):
    p, q, toks = S.tree_batch(case, B, np.random.default_rng(seed))
    f = torch.float32
    tokens, num, path = Vf.verify_tree(torch.from_numpy(p).to(f),
                                       None if q is None else torch.from_numpy(q).to(f),
                                       torch.from_numpy(toks), case.parents,
                                       generator=torch.Generator().manual_seed(seed))
    return _records(tokens, num, path)


def _chain_target(case):
    return lambda nodes, toks: case.model.p_row(len(toks), list(toks))


def _tree_target(case):
    return lambda nodes, toks: case.target_row(nodes[-1] if nodes else -1, list(toks))


def test_chain_sampled_drafts_chisquare():
    case = S.ChainCase(3, 4, _model(4, 11))
    recs = _run_chain(case, 101)
    _outcome_test("chain sampled", recs, X.chain_law(case))
    _first_token_test("chain sampled", recs, case.model.p_row(0, []))
    _conditional_test("chain sampled", recs, _chain_target(case), case.V)


def test_chain_deterministic_drafts_chisquare():
    model = _model(5, 10)
    toks = []
    for j in range(4):
        toks.append(int(np.argmax(model.q_row(j, toks))))
    case = S.ChainCase(4, 5, model, toks)
    recs = _run_chain(case, 102)
    _outcome_test("chain greedy-drafter", recs, X.chain_law(case))
    _first_token_test("chain greedy-drafter", recs, model.p_row(0, []))
    _conditional_test("chain greedy-drafter", recs, _chain_target(case), case.V)


TREE = [-1, -1, -1, 0, 0, 1, 3, 3, 5]      # 9 nodes, depth 4; root has 3 children


def test_tree_sampled_children_chisquare():
    case = S.TreeCase(TREE, 4, _model(4, 15), "sampled", sibling_q="shared")
    recs = _run_tree(case, 103)
    _outcome_test("tree sampled", recs, X.tree_law(case))
    _first_token_test("tree sampled", recs, case.target_row(-1, []))
    _conditional_test("tree sampled", recs, _tree_target(case), case.V)


def test_tree_topk_children_chisquare():
    model = _model(5, 19)
    case = S.TreeCase(TREE, 5, model, "topk", tokens=S.topk_tokens(TREE, model))
    recs = _run_tree(case, 104)
    _outcome_test("tree top-k", recs, X.tree_law(case))
    _first_token_test("tree top-k", recs, case.target_row(-1, []))
    _conditional_test("tree top-k", recs, _tree_target(case), case.V)


# --------------------------------------------------------------------------- acceptance length

def test_expected_tokens_sampled_mean_matches_theory():
    """Constant alpha: the same (p, q) at every position. Theory: E[num_tokens] =
    (1 - alpha^(K+1)) / (1 - alpha); the sampled mean over B rows must lie within 4 standard
    errors (the exact standard deviation of num_tokens / sqrt(B); two-sided false-alarm rate
    6e-5), and the length histogram must pass the chi-square test against the truncated
    geometric law."""
    V, K = 16, 4
    rng = np.random.default_rng(5)
    p = rng.dirichlet(np.ones(V))
    q = 0.5 * p + 0.5 * rng.dirichlet(np.ones(V))
    alpha = float(np.minimum(p, q).sum())
    case = S.ChainCase(K, V, S.PoolModel(p[None], q[None], False))
    recs = _run_chain(case, 105)
    lengths = np.array([len(t) for _, t in recs])
    law = X.chain_length_law(alpha, K)
    n = np.arange(1, K + 2)
    mean = float((law * n).sum())
    sd = float(np.sqrt((law * n ** 2).sum() - mean ** 2))
    expected = (1 - alpha ** (K + 1)) / (1 - alpha)
    assert mean == pytest.approx(expected, rel=1e-12)
    z = (lengths.mean() - expected) / (sd / np.sqrt(B))
    line = (f"E[num_tokens]: alpha={alpha:.4f} K={K} theory={expected:.4f} "
            f"sampled={lengths.mean():.4f} z={z:+.2f} (|z| < 4 required)")
    print(line)
    _RESULTS.append(line)
    assert abs(z) < 4
    _record("num_tokens histogram", *_chisq(np.bincount(lengths, minlength=K + 2)[1:], law * B))


# --------------------------------------------------------------------------- power (negative control)

def test_chisquare_detects_a_lossy_rule():
    """The same checks reject a rule known to be wrong: Medusa's typical acceptance (lossy) run on
    the chain-sampled case. Shows that the tests above have power at B = 20,000."""
    case = S.ChainCase(3, 4, _model(4, 11))
    p, q, x = S.chain_batch(case, B, np.random.default_rng(101))
    tokens, num = Vf.verify_chain_typical_lossy(torch.from_numpy(p).float(), torch.from_numpy(x),
                                                generator=torch.Generator().manual_seed(101))
    recs = _records(tokens, num)
    obs = np.bincount([t[0] for _, t in recs], minlength=case.V)
    stat, dof, pval = _chisq(obs, case.model.p_row(0, []) * B)
    line = f"typical (lossy) first token: chi2={stat:.1f} dof={dof} p={pval:.3g} (must be < {ALPHA:g})"
    print(line)
    _RESULTS.append(line)
    assert pval < ALPHA
