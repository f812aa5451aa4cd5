"""Acceptance models and draft trees (sim/acceptance.py, sim/trees.py, sim/dyntree.py)."""
import random

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sim import trees as T
from sim.acceptance import RankDepth, chain_expected_tokens, chain_rates, solve_rate
from sim.dyntree import Confidence, TreeLibrary, grow


@given(alpha=st.floats(0.0, 0.999), k=st.integers(1, 8))
def test_chain_expected_tokens_is_leviathan_formula(alpha, k):
    """E[tokens per step] of a K-chain with constant rate α = (1 − α^(K+1)) / (1 − α)."""
    model = chain_rates([alpha])
    expected = 1.0 + model.expected(T.chain(k))  # accepted drafts + the bonus token
    assert expected == pytest.approx((1 - alpha ** (k + 1)) / (1 - alpha), rel=1e-12)
    assert chain_expected_tokens(alpha, k) == pytest.approx(expected, rel=1e-12)


def test_chain_sampling_matches_formula():
    alpha, k, n = 0.8, 4, 200_000
    tree = chain_rates([alpha]).compile(T.chain(k))
    rnd = random.Random(3).random
    lengths = np.array([len(tree.sample(rnd)) for _ in range(n)])
    theory = chain_expected_tokens(alpha, k) - 1
    se = lengths.std() / np.sqrt(n)
    assert abs(lengths.mean() - theory) < 5 * se
    # P(L >= j) = α^j
    for j in range(1, k + 1):
        assert np.mean(lengths >= j) == pytest.approx(alpha ** j, abs=5 * np.sqrt(alpha ** j / n))


@given(tau=st.floats(1.0, 6.0), k=st.integers(5, 8))
def test_mean_accepted_solves_to_a_constant_rate(tau, k):
    a = solve_rate(tau, k)
    assert chain_expected_tokens(a, k) == pytest.approx(tau, abs=1e-9)


def test_mean_accepted_outside_range_is_rejected():
    with pytest.raises(ValueError):
        solve_rate(5.5, 4)


RANKS = RankDepth(((0.6, 0.15, 0.08), (0.5, 0.2), (0.4, 0.1), (0.3,)))


def test_rank_depth_dp_equals_path_probability_sum_and_sampling():
    tree = T.greedy_static_tree(RANKS.probs, 12)
    compiled = RANKS.compile(tree)
    d, r = T.depths(tree), T.ranks(tree)
    # brute force: Σ over nodes of the product of P along its path
    total = 0.0
    for i in range(len(tree)):
        p, j = 1.0, i
        while j >= 0:
            p *= RANKS.p(d[j], r[j])
            j = tree[j]
        total += p
    assert compiled.expected == pytest.approx(total, rel=1e-12)
    rnd = random.Random(5).random
    n = 100_000
    mean = sum(len(compiled.sample(rnd)) for _ in range(n)) / n
    assert mean == pytest.approx(total, abs=0.02)


def test_sampled_paths_are_root_paths():
    tree = T.greedy_static_tree(RANKS.probs, 20)
    compiled = RANKS.compile(tree)
    rnd = random.Random(1).random
    for _ in range(2000):
        path = compiled.sample(rnd)
        prev = -1
        for node in path:
            assert tree[node] == prev
            prev = node


def test_greedy_tree_is_optimal_among_small_trees():
    """Greedy on path probability is optimal for this objective: no single swap improves it."""
    tree = T.greedy_static_tree(RANKS.probs, 6)
    best = RANKS.expected(tree)
    assert T.is_tree(tree) and len(tree) == 6
    chain = T.chain(4)
    assert best >= RANKS.expected(chain) - 1e-12


@pytest.mark.parametrize("depth,topk,tokens", [(6, 10, 60), (3, 4, 10), (1, 8, 8)])
def test_dynamic_trees_are_valid_and_sized(depth, topk, tokens):
    rng = np.random.default_rng(0)
    for _ in range(20):
        t = grow(Confidence(top1_mean=0.6), rng, depth, topk, tokens)
        assert T.is_tree(t.parents) and len(t.parents) == tokens
        assert max(T.depths(t.parents)) <= depth
        assert 0 < t.expected < depth


def test_dynamic_tree_acceptance_grows_with_confidence():
    lo = TreeLibrary(Confidence(top1_mean=0.4), 10, 60, seed=1, size=64).expected(6)
    hi = TreeLibrary(Confidence(top1_mean=0.8), 10, 60, seed=1, size=64).expected(6)
    assert hi > lo + 1.0


def test_library_is_seeded():
    a = TreeLibrary(Confidence(), 8, 30, seed=3, size=8).trees(4)
    b = TreeLibrary(Confidence(), 8, 30, seed=3, size=8).trees(4)
    assert [t.parents for t in a] == [t.parents for t in b]


@pytest.mark.parametrize("seed", [0, 1])
def test_one_draw_sampling_has_the_walks_law(seed):
    """sample() draws where the walk stops in one step; its law must be the walk's."""
    rng = np.random.default_rng(seed)
    tree = grow(Confidence(top1_mean=0.6), rng, 5, 6, 30)
    assert tree.stop_cum[-1] == pytest.approx(1.0, abs=1e-12)
    n = 200_000
    a, b = random.Random(1).random, random.Random(2).random
    fast = np.bincount([len(tree.sample(a)) for _ in range(n)], minlength=7)
    slow = np.bincount([len(tree.walk(b)) for _ in range(n)], minlength=7)
    from scipy.stats import chi2_contingency
    table = np.array([fast, slow])
    table = table[:, table.sum(0) > 0]
    assert chi2_contingency(table)[1] > 1e-3  # false-alarm rate 1e-3
    assert np.mean([len(tree.sample(a)) for _ in range(n)]) == pytest.approx(tree.expected, abs=0.02)
