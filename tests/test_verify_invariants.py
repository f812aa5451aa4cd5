"""Invariants of engine/verify.py and replay against plain per-row Python loops.

The torch functions take their random numbers from private entry points
(``_verify_chain_uniforms`` / ``_verify_tree_uniforms``), so the per-row loops in
tests/verify_exact.py can consume the very same uniforms: accept/reject decisions, accepted
counts and the emitted tokens must then agree exactly (float64 inputs, the same IEEE operations).
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import event, given, strategies as st

try:                    # tests/ is a package (tests/__init__.py): import through it
    from tests import strategies as S
    from tests import verify_exact as X
except ImportError:     # tests/ itself on sys.path
    import strategies as S
    import verify_exact as X
from engine import verify as Vf
from engine.sampling import warp

unit = st.floats(0.0, 1.0, exclude_max=True, allow_subnormal=False)


@st.composite
def chain_inputs(draw, deterministic=None):
    """Arbitrary batched chain inputs: per (row, position) a (p, q) pair from dist_pairs, draft
    tokens drawn by Hypothesis (so q(x) = 0 and p(x) = 0 both occur), explicit uniforms."""
    B = draw(st.integers(1, 4))
    K = draw(st.integers(1, 5))
    V = draw(st.integers(2, 8))
    det = draw(st.booleans()) if deterministic is None else deterministic
    p = np.zeros((B, K + 1, V))
    q = np.zeros((B, K, V))
    for b in range(B):
        for j in range(K + 1):
            pj, qj, _ = draw(S.dist_pairs(V))
            p[b, j] = pj
            if j < K:
                q[b, j] = qj
    x = np.array(draw(st.lists(st.lists(st.integers(0, V - 1), min_size=K, max_size=K),
                               min_size=B, max_size=B)), dtype=np.int64).reshape(B, K)
    ua = np.array(draw(st.lists(unit, min_size=B * K, max_size=B * K))).reshape(B, K)
    us = np.array(draw(st.lists(unit, min_size=B, max_size=B)))
    return p, (None if det else q), x, ua, us


@st.composite
def tree_inputs(draw):
    parents = draw(S.tree_parents(max_nodes=12, min_nodes=0))
    T = len(parents)
    B = draw(st.integers(1, 3))
    V = draw(st.integers(2, 8))
    det = draw(st.booleans())
    p = np.zeros((B, T + 1, V))
    q = np.zeros((B, T, V))
    for b in range(B):
        for i in range(T + 1):
            pi, qi, _ = draw(S.dist_pairs(V))
            p[b, i] = pi
            if i < T:
                q[b, i] = qi
    toks = np.array(draw(st.lists(st.integers(0, V - 1), min_size=B * T, max_size=B * T)),
                    dtype=np.int64).reshape(B, T)
    ua = np.array(draw(st.lists(unit, min_size=B * T, max_size=B * T))).reshape(B, T)
    us = np.array(draw(st.lists(unit, min_size=B, max_size=B)))
    return parents, p, (None if det else q), toks, ua, us


def _t(a):
    return None if a is None else torch.from_numpy(np.ascontiguousarray(a))


def _check_output_shape(tokens, num, D):
    B = tokens.shape[0]
    assert tokens.dtype == torch.int64 and num.dtype == torch.int64
    assert tokens.shape == (B, D + 1) and num.shape == (B,)
    assert ((num >= 1) & (num <= D + 1)).all()
    pos = torch.arange(D + 1)
    assert (tokens[pos >= num[:, None]] == -1).all()
    assert (tokens[pos < num[:, None]] >= 0).all()


@given(chain_inputs())
def test_chain_matches_python_loop(inputs):
    p, q, x, ua, us = inputs
    tokens, num = Vf._verify_chain_uniforms(_t(p), _t(q), _t(x), _t(ua), _t(us))
    K = x.shape[1]
    _check_output_shape(tokens, num, K)
    ref_tokens, ref_num = X.chain_loop(p, q, x, ua, us)
    assert num.tolist() == ref_num
    assert tokens.tolist() == ref_tokens
    # accepted drafts are the drafts; the last token never has target probability 0
    for b in range(len(num)):
        n = int(num[b])
        assert tokens[b, :n - 1].tolist() == x[b, :n - 1].tolist()
        assert p[b, n - 1, int(tokens[b, n - 1])] > 0


@given(tree_inputs())
def test_tree_matches_python_loop(inputs):
    parents, p, q, toks, ua, us = inputs
    tokens, num, path = Vf._verify_tree_uniforms(_t(p), _t(q), _t(toks), parents, _t(ua), _t(us))
    D = max(S.tree_depths(parents), default=0)
    _check_output_shape(tokens, num, D)
    ref_tokens, ref_num, ref_path = X.tree_loop(p, q, toks, parents, ua, us)
    assert num.tolist() == ref_num
    assert tokens.tolist() == ref_tokens
    assert path.tolist() == ref_path
    for b in range(len(num)):
        n = int(num[b])
        nodes = path[b, :n - 1].tolist()
        assert (path[b, n - 1:] == -1).all()
        # the path is a root path of the tree, its tokens are the nodes' tokens
        for d, node in enumerate(nodes):
            assert parents[node] == (nodes[d - 1] if d else -1)
            assert int(tokens[b, d]) == int(toks[b, node])


@given(chain_inputs())
def test_tree_on_a_chain_equals_chain(inputs):
    p, q, x, ua, us = inputs
    K = x.shape[1]
    a_tok, a_num = Vf._verify_chain_uniforms(_t(p), _t(q), _t(x), _t(ua), _t(us))
    b_tok, b_num, b_path = Vf._verify_tree_uniforms(_t(p), _t(q), _t(x), Vf.chain_parents(K),
                                                    _t(ua), _t(us))
    assert torch.equal(a_num, b_num)
    # Tree residuals renormalise R before each comparison; the chain compares raw p. On
    # normalised float64 inputs this changes values by rounding only, so equality is exact
    # except in the measure-zero case of a uniform landing on the rounding gap.
    assert torch.equal(a_tok, b_tok)
    pos = torch.arange(K)
    assert torch.equal(b_path, torch.where(pos < (b_num - 1)[:, None], pos, -1))


def test_chain_k0_and_tree_t0_emit_one_token_from_p():
    p = torch.tensor([[[0.0, 0.0, 1.0]]], dtype=torch.float64)
    tok, num = Vf.verify_chain(p, None, torch.zeros((1, 0), dtype=torch.int64))
    assert tok.tolist() == [[2]] and num.tolist() == [1]
    tok, num, path = Vf.verify_tree(p, None, torch.zeros((1, 0), dtype=torch.int64), [])
    assert tok.tolist() == [[2]] and num.tolist() == [1] and path.shape == (1, 0)


# --------------------------------------------------------------------------- edge cases by hand

def test_chain_edge_cases_by_hand():
    f = torch.float64
    # p == q: residual all zero, every draft accepted (u * q < p = q for u < 1)
    p = torch.tensor([[[0.3, 0.7], [0.3, 0.7], [1.0, 0.0]]], dtype=f)
    q = p[:, :2].clone()
    tok, num = Vf._verify_chain_uniforms(p, q, torch.tensor([[1, 0]]),
                                         torch.tensor([[0.999999, 0.999999]], dtype=f),
                                         torch.tensor([0.5], dtype=f))
    assert num.tolist() == [3] and tok.tolist() == [[1, 0, 0]]
    # disjoint supports: always rejected, correction from p
    p = torch.tensor([[[0.0, 1.0], [0.5, 0.5]]], dtype=f)
    q = torch.tensor([[[1.0, 0.0]]], dtype=f)
    tok, num = Vf._verify_chain_uniforms(p, q, torch.tensor([[0]]), torch.tensor([[0.0]], dtype=f),
                                         torch.tensor([0.0], dtype=f))
    assert tok.tolist() == [[1, -1]] and num.tolist() == [1]
    # q(x) = 0 for the drafted token, p(x) > 0: accepted; p(x) = 0 too: rejected
    q = torch.tensor([[[1.0, 0.0]]], dtype=f)
    tok, _ = Vf._verify_chain_uniforms(p, q, torch.tensor([[1]]), torch.tensor([[0.99]], dtype=f),
                                       torch.tensor([0.0], dtype=f))
    assert tok.tolist() == [[1, 0]]
    p0 = torch.tensor([[[1.0, 0.0, 0.0], [0.5, 0.5, 0.0]]], dtype=f)
    q0 = torch.tensor([[[1.0, 0.0, 0.0]]], dtype=f)
    tok, num = Vf._verify_chain_uniforms(p0, q0, torch.tensor([[2]]),
                                         torch.tensor([[0.0]], dtype=f),
                                         torch.tensor([0.99], dtype=f))
    # residual max(0, p - q) is all zero (p == q): falls back to p, never NaN
    assert tok.tolist() == [[0, -1]] and num.tolist() == [1]
    # a uniform at the top of [0, 1) never selects a zero-probability token
    p = torch.tensor([[[0.25, 0.75, 0.0, 0.0]]], dtype=f)
    tok, _ = Vf._verify_chain_uniforms(p, None, torch.zeros((1, 0), dtype=torch.int64),
                                       torch.zeros((1, 0), dtype=f),
                                       torch.tensor([1.0 - 2 ** -53], dtype=f))
    assert tok.tolist() == [[1]]


def test_deterministic_topk_children_by_hand():
    """Root p = (0.5, 0.3, 0.2); children tokens 0 then 1 (point masses). Child 0 accepted with
    prob 0.5; else R = (0, 0.6, 0.4) and child 1 accepted with prob 0.6; else token 2."""
    f = torch.float64
    p = torch.tensor([[[0.5, 0.3, 0.2], [1, 0, 0], [0, 1, 0]]], dtype=f).repeat(3, 1, 1)
    toks = torch.tensor([[0, 1]] * 3)
    ua = torch.tensor([[0.49, 0.0], [0.51, 0.59], [0.51, 0.61]], dtype=f)
    us = torch.tensor([0.0, 0.0, 0.0], dtype=f)
    tok, num, path = Vf._verify_tree_uniforms(p, None, toks, [-1, -1], ua, us)
    assert tok.tolist() == [[0, 0], [1, 1], [2, -1]]
    assert num.tolist() == [2, 2, 1]
    assert path.tolist() == [[0], [1], [-1]]


# --------------------------------------------------------------------------- greedy

@st.composite
def logits_with_ties(draw, shape):
    n = int(np.prod(shape))
    vals = draw(st.lists(st.integers(-3, 3), min_size=n, max_size=n))
    return np.array(vals, dtype=np.float64).reshape(shape)


@given(st.data())
def test_chain_greedy_matches_argmax_chain(data):
    B, K, V = data.draw(st.integers(1, 4)), data.draw(st.integers(0, 5)), data.draw(st.integers(2, 6))
    logits = data.draw(logits_with_ties((B, K + 1, V)))
    lt = torch.from_numpy(logits)
    if data.draw(st.booleans()):   # drafts mostly equal to the argmax, to reach long prefixes
        x = torch.argmax(lt[:, :K], dim=-1)
        flip = np.array(data.draw(st.lists(st.booleans(), min_size=B * K, max_size=B * K)),
                        dtype=bool)
        x = torch.where(torch.from_numpy(flip.reshape(B, K)), (x + 1) % V, x)
    else:
        x = torch.from_numpy(np.array(data.draw(st.lists(st.integers(0, V - 1), min_size=B * K,
                                                         max_size=B * K)), dtype=np.int64).reshape(B, K))
    tok, num = Vf.verify_chain_greedy(lt, x)
    _check_output_shape(tok, num, K)
    ref_tok, ref_num = X.chain_greedy_loop(logits, x.numpy())
    assert tok.tolist() == ref_tok and num.tolist() == ref_num
    # temperature 0 through warp + the sampling rule with deterministic drafts: same result,
    # whatever the random numbers
    probs = warp(lt, 0.0)
    for seed in (0, 1):
        g = torch.Generator().manual_seed(seed)
        s_tok, s_num = Vf.verify_chain(probs, None, x, generator=g)
        assert torch.equal(s_tok, tok) and torch.equal(s_num, num)
    # the tree greedy on a chain-shaped tree is the chain greedy
    t_tok, t_num, _ = Vf.verify_tree_greedy(lt, x, Vf.chain_parents(K))
    assert torch.equal(t_tok, tok) and torch.equal(t_num, num)


@given(st.data())
def test_tree_greedy_longest_argmax_path(data):
    parents = data.draw(S.tree_parents(max_nodes=12, min_nodes=0))
    T = len(parents)
    B, V = data.draw(st.integers(1, 4)), data.draw(st.integers(2, 4))
    logits = data.draw(logits_with_ties((B, T + 1, V)))
    toks = np.array(data.draw(st.lists(st.integers(0, V - 1), min_size=B * T, max_size=B * T)),
                    dtype=np.int64).reshape(B, T)
    tok, num, path = Vf.verify_tree_greedy(torch.from_numpy(logits), torch.from_numpy(toks),
                                           parents)
    D = max(S.tree_depths(parents), default=0)
    _check_output_shape(tok, num, D)
    ref_tok, ref_num, ref_path = X.tree_greedy_loop(logits, toks, parents)
    assert tok.tolist() == ref_tok and num.tolist() == ref_num and path.tolist() == ref_path


@given(st.data())
def test_tree_greedy_equals_sampling_rule_at_temperature_zero(data):
    """With distinct sibling tokens at most one child matches, so the greedy longest path equals
    the walk of verify_tree on one-hot targets with deterministic children."""
    parents = data.draw(S.tree_parents(max_nodes=10, min_nodes=0))
    T = len(parents)
    V = data.draw(st.integers(4, 6))
    B = 3
    logits = torch.from_numpy(data.draw(logits_with_ties((B, T + 1, V))))
    a = torch.argmax(logits, dim=-1)
    toks = torch.zeros((B, T), dtype=torch.int64)
    rank = {}
    for i, par in enumerate(parents):
        r = rank.get(par, 0)
        rank[par] = r + 1
        # the first or second child of a node sometimes takes the argmax; siblings stay distinct
        shift = data.draw(st.sampled_from([0, 0, 0, 1])) if r == 0 else r + 2
        toks[:, i] = (a[:, par + 1] + shift) % V if r < V - 1 else -1
    if (toks < 0).any():
        event("skipped: more children than tokens")
        return
    # siblings distinct per row?
    for par in set(parents):
        kids = [i for i, pp in enumerate(parents) if pp == par]
        for b in range(B):
            vals = toks[b, kids].tolist()
            if len(set(vals)) != len(vals):
                event("skipped: equal sibling tokens")
                return
    g_tok, g_num, g_path = Vf.verify_tree_greedy(logits, toks, parents)
    s_tok, s_num, s_path = Vf.verify_tree(warp(logits, 0.0), None, toks, parents,
                                          generator=torch.Generator().manual_seed(3))
    event(f"checked; longest accepted path {int(g_num.max()) - 1}")
    assert torch.equal(g_tok, s_tok) and torch.equal(g_num, s_num) and torch.equal(g_path, s_path)


# --------------------------------------------------------------------------- typical (lossy)

@given(S.tree_cases(mode="topk"), st.sampled_from([(0.09, 0.3), (0.3, 0.5), (0.01, 0.1)]))
def test_typical_tree_matches_reference(case, params):
    eps, delta = params
    B = 2
    p, _, toks = S.tree_batch(case, B, np.random.default_rng(0))
    tok, num, path = Vf.verify_tree_typical_lossy(torch.from_numpy(p), torch.from_numpy(toks),
                                                  case.parents, eps, delta, bonus="greedy")
    law = X.tree_typical_law(case, eps, delta, bonus="greedy")
    assert len(law.outcomes) == 1
    (nodes, emitted), pr = next(iter(law.outcomes.items()))
    assert pr == pytest.approx(1.0)
    for b in range(B):
        n = int(num[b])
        assert tuple(path[b, :n - 1].tolist()) == nodes
        assert tuple(tok[b, :n].tolist()) == emitted


def test_typical_chain_by_hand():
    # threshold at a uniform p over 4 tokens: min(0.09, 0.3 * exp(-ln 4)) = 0.075 < 0.25
    f = torch.float64
    p = torch.full((1, 3, 4), 0.25, dtype=f)
    p[0, 1] = torch.tensor([0.96, 0.02, 0.01, 0.01], dtype=f)   # H small: threshold 0.09
    tok, num = Vf.verify_chain_typical_lossy(p, torch.tensor([[3, 1]]), bonus="greedy")
    assert tok.tolist() == [[3, 0, -1]] and num.tolist() == [2]
    tok, num = Vf.verify_chain_typical_lossy(p, torch.tensor([[3, 0]]), bonus="greedy")
    assert tok.tolist() == [[3, 0, 0]] and num.tolist() == [3]


# --------------------------------------------------------------------------- API behaviour

def test_generator_reproducible_and_dtypes():
    rng = np.random.default_rng(0)
    B, K, V = 64, 4, 50
    p = torch.softmax(torch.from_numpy(rng.normal(size=(B, K + 1, V))), -1)
    q = torch.softmax(torch.from_numpy(rng.normal(size=(B, K, V))), -1)
    x = torch.multinomial(q.reshape(-1, V), 1, generator=torch.Generator().manual_seed(0))
    x = x.reshape(B, K)
    runs = [Vf.verify_chain(p, q, x, generator=torch.Generator().manual_seed(7)) for _ in range(2)]
    assert torch.equal(runs[0][0], runs[1][0])
    for dt in (torch.float32, torch.float16, torch.bfloat16):
        tok, num = Vf.verify_chain(p.to(dt), q.to(dt), x, generator=torch.Generator().manual_seed(1))
        _check_output_shape(tok, num, K)
    parents = [-1, -1, 0, 0, 1, 2]
    t_tok, t_num, t_path = Vf.verify_tree(p[:, :1].repeat(1, 7, 1), q[:, :1].repeat(1, 6, 1),
                                          x[:, :1].repeat(1, 6), torch.tensor(parents))
    _check_output_shape(t_tok, t_num, 3)


def test_bad_arguments_raise():
    p = torch.full((2, 3, 4), 0.25)
    with pytest.raises(ValueError):
        Vf.verify_chain(p, None, torch.zeros((2, 3), dtype=torch.int64))
    with pytest.raises(ValueError):
        Vf.verify_chain(p, torch.full((2, 2, 5), 0.2), torch.zeros((2, 2), dtype=torch.int64))
    with pytest.raises(ValueError):
        Vf.verify_tree(p, None, torch.zeros((2, 2), dtype=torch.int64), [0, -1])
    with pytest.raises(TypeError):
        Vf.verify_chain(p.long(), None, torch.zeros((2, 2), dtype=torch.int64))
    with pytest.raises(ValueError):
        Vf.verify_tree_typical_lossy(p, torch.zeros((2, 2), dtype=torch.int64), [-1, 0],
                                     bonus="nope")
