"""Closed-form checks of the verification rules (tests/verify_exact.py enumerates exact laws).

The theorem checked (stated precisely in tests/verify_exact.py): for every history h (accepted
node path and tokens) reached with probability P(h) > 0, the token emitted next is distributed as
the target row at h: M_h = P(h) p_h, to 1e-9 relative (1e-14 absolute). That is what makes the
tokens over successive steps an exact sample of the target.
"""
from __future__ import annotations


import numpy as np
import pytest
from hypothesis import HealthCheck, event, find, given, settings, strategies as st

try:                    # tests/ is a package (tests/__init__.py): import through it
    from tests import strategies as S
    from tests import verify_exact as X
except ImportError:     # tests/ itself on sys.path
    import strategies as S
    import verify_exact as X


# --------------------------------------------------------------------------- lossless: the theorem

@given(S.chain_cases())
def test_chain_law_equals_target(case):
    event(f"K={case.K}")
    event(f"V={case.V}")
    event("prefix-dependent" if case.model.prefix_dependent else "per-position")
    law = X.chain_law(case)
    n = X.check_target_law(law)
    assert n >= 1


@given(S.chain_cases(deterministic=True))
def test_chain_deterministic_drafts_law_equals_target(case):
    X.check_target_law(X.chain_law(case))


@given(S.tree_cases(mode="sampled"))
def test_tree_sampled_law_equals_target(case):
    event(f"nodes={case.T // 4 * 4}-{case.T // 4 * 4 + 3}")
    event(f"depth={max(S.tree_depths(case.parents))}")
    event(f"V={case.V}")
    X.check_target_law(X.tree_law(case))


@given(S.tree_cases(mode="topk"))
def test_tree_topk_law_equals_target(case):
    event(f"nodes={case.T // 4 * 4}-{case.T // 4 * 4 + 3}")
    event(f"depth={max(S.tree_depths(case.parents))}")
    X.check_target_law(X.tree_law(case))


@given(st.integers(1, 4), st.integers(2, 5), st.data())
def test_chain_and_tree_enumerations_agree_on_chain_trees(K, V, data):
    """Two independent enumerations (level-wise chain, recursive tree) of the same process."""
    model = data.draw(S.pool_models(V))
    det = data.draw(st.booleans())
    if det:
        toks = data.draw(st.lists(st.integers(0, V - 1), min_size=K, max_size=K))
        chain = S.ChainCase(K, V, model, toks)
        tree = S.TreeCase(list(range(-1, K - 1)), V, model, "topk", tokens=toks)
    else:
        chain = S.ChainCase(K, V, model)
        tree = S.TreeCase(list(range(-1, K - 1)), V, model, "sampled")
    a, b = X.chain_law(chain).outcomes, X.tree_law(tree).outcomes
    keys = set(a) | set(b)
    assert max(abs(a.get(k, 0.0) - b.get(k, 0.0)) for k in keys) <= 1e-12


def test_theorem_check_rejects_a_wrong_law():
    """The checker is not vacuous: an off-by-a-bit law fails it."""
    model = S.PoolModel(np.array([[0.5, 0.5]]), np.array([[0.9, 0.1]]), False)
    law = X.chain_law(S.ChainCase(1, 2, model))
    X.check_target_law(law)
    nodes, toks, P, M = law.steps[0]
    law.steps[0] = (nodes, toks, P, M + np.array([[1e-6, -1e-6]]))
    with pytest.raises(AssertionError):
        X.check_target_law(law)


# --------------------------------------------------------------------------- acceptance length

@given(st.integers(1, 5), st.integers(2, 8), st.data())
def test_expected_tokens_constant_alpha(K, V, data):
    """Same (p, q) at every position: E[num_tokens] = (1 - a^(K+1)) / (1 - a), a = sum min(p, q),
    and num_tokens - 1 is a truncated geometric law."""
    p, q, _ = data.draw(S.dist_pairs(V))
    model = S.PoolModel(p[None], q[None], prefix_dependent=False)
    law = X.chain_law(S.ChainCase(K, V, model))
    alpha = float(np.minimum(p, q).sum())
    assert law.expected_num_tokens() == pytest.approx(X.chain_expected_tokens(alpha, K),
                                                      rel=1e-12, abs=1e-12)
    if alpha < 0.999:    # the closed form itself, where 1 - alpha does not cancel
        closed = (1 - alpha ** (K + 1)) / (1 - alpha)
        assert law.expected_num_tokens() == pytest.approx(closed, rel=1e-9)
    if V ** K <= 4096:
        lengths = law.length_law()
        want = X.chain_length_law(alpha, K)
        for n in range(1, K + 2):
            assert lengths.get(n, 0.0) == pytest.approx(want[n - 1], abs=1e-12)


def test_expected_tokens_hand_example():
    # p = (0.5, 0.5), q = (0.9, 0.1): alpha = 0.6; K = 2: 1 + 0.6 + 0.36 = 1.96
    model = S.PoolModel(np.array([[0.5, 0.5]]), np.array([[0.9, 0.1]]), False)
    law = X.chain_law(S.ChainCase(2, 2, model))
    assert law.expected_num_tokens() == pytest.approx(1.96, abs=1e-15)
    assert X.chain_expected_tokens(0.6, 2) == pytest.approx(1.96, abs=1e-15)


# --------------------------------------------------------------------------- typical is LOSSY

EPS, DELTA = 0.09, 0.3


def test_typical_lossy_fixed_counterexample():
    """p = (0.5, 0.5) at the root and a deterministic draft 0: the threshold is
    min(0.09, 0.3 * exp(-ln 2)) = 0.09 < 0.5, so token 0 is always accepted; the first emitted
    token is always 0, whereas the target gives it probability 1/2: total variation 0.5."""
    model = S.PoolModel(np.array([[0.5, 0.5]]), np.array([[1.0, 0.0]]), False)
    case = S.ChainCase(1, 2, model, draft_tokens=[0])
    law = X.chain_typical_law(case, EPS, DELTA)
    first = law.first_token_law(2)
    assert first.tolist() == [1.0, 0.0]
    assert X.total_variation(first, [0.5, 0.5]) == pytest.approx(0.5)
    with pytest.raises(AssertionError):
        X.check_target_law(law)
    # the lossless rule on the same case is exact
    X.check_target_law(X.chain_law(case))


def _typical_departure(case) -> float:
    law = X.chain_typical_law(case, EPS, DELTA)
    return X.total_variation(law.first_token_law(case.V), case.model.p_row(0, []))


def test_typical_lossy_found_by_search():
    """Hypothesis searches sampled-draft chains for a case where the first emitted token's law
    departs from the target's by more than 0.05 in total variation."""
    case = find(S.chain_cases(deterministic=False, max_K=2, max_V=4),
                lambda c: _typical_departure(c) > 0.05,
                settings=settings(max_examples=500, database=None, derandomize=True,
                                  suppress_health_check=list(HealthCheck)))
    tv = _typical_departure(case)
    print(f"typical counterexample: K={case.K} V={case.V} p={case.model.p_pool.tolist()} "
          f"q={case.model.q_pool.tolist()} TV={tv:.4f}")
    assert tv > 0.05


def test_typical_tree_departs_from_target():
    """Topk tree: root p = (0.6, 0.3, 0.1), children tokens 0 and 1 (both accepted by typical):
    the first token is always 0 (the deeper/first path), TV = 0.4."""
    p = np.array([[0.6, 0.3, 0.1]])
    model = S.PoolModel(p, p, False)
    case = S.TreeCase([-1, -1], 3, model, "topk", tokens=[0, 1])
    law = X.tree_typical_law(case, EPS, DELTA)
    first = law.first_token_law(3)
    assert X.total_variation(first, p[0]) == pytest.approx(0.4)
    X.check_target_law(X.tree_law(case))       # the lossless tree rule is exact here


@given(S.chain_cases())
def test_typical_is_a_distribution(case):
    law = X.chain_typical_law(case, EPS, DELTA)
    # a sum over up to V^(K+1) = 117,649 outcomes in float64 carries ~1e-11 of rounding; 1e-9 is the
    # suite's exactness bound everywhere else
    assert abs(law.total - 1.0) < 1e-9
    # the emitted tokens after the accepted prefix never have target probability 0
    for (_, toks), pr in law.outcomes.items():
        assert pr > 0
