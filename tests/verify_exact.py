"""Closed-form reference for speculative verification: exact output laws by enumeration.

Pure numpy float64 and Python; no torch. Not a test module: the test_verify_* modules import it.

What is computed
----------------
For a verification rule run on a small vocabulary, the exact law of everything it can emit is
obtained by enumerating the draft tokens (each drawn from its draft distribution, so each branch
carries probability q(x)) and the accept/reject branches (probabilities min(1, R(x)/q(x)) and its
complement), and accumulating probability mass. Two things are returned (``ExactLaw``):

* ``outcomes``: the law of the emitted record, keyed by (accepted node path, emitted tokens); for
  a chain the node path is (0, 1, ..., n-2), the positions of the accepted drafts.
* ``steps``: for every *history* h = (accepted nodes v_1..v_{j-1}, their tokens y_1..y_{j-1})
  that the process reaches with positive probability, the vector M_h(y) = P(history h is reached
  and the token emitted at depth j is y), together with the target row p_h the model assigns to
  depth j after h (the target row of node v_{j-1}; the root row for j = 1).

The theorem that the tests check (``check_target_law``)
-------------------------------------------------------
Lossless speculative verification (chain, or tree with sampled or deterministic children) emits
tokens whose law matches the target's in the autoregressive sense: for every depth j and every
history h reached with probability P(h) > 0,

    P(Y_j = y | history h, the process emits at least j tokens) = p_h(y)   for every token y,

i.e. M_h = P(h) * p_h. Conditioning on the *node* path (not just on the tokens) makes this
stronger than the token-level statement; it implies it. Because the emitted length is decided
only after each token is emitted (stop or go on), and every conditional law equals the target's,
the tokens emitted over successive verification steps are distributed exactly as a sample from
the target model: at each position, given everything emitted so far, the next token is drawn
from the target's conditional. Note that the emitted *sequence* is not a product of target
marginals with an independent length: the decision to stop after y_j is correlated with y_j (a
rejected draft is replaced by a residual token and stops the step). The statement above is the
exact one.

Numerical tolerance: the check is |M_h(y) - P(h) p_h(y)| <= 1e-9 * P(h) + 1e-14 (the absolute
term covers histories of probability < 1e-5, whose conditionals float64 cannot resolve to 1e-9).
Theory says the two sides are equal; float64 enumeration agrees far below this tolerance.

Rules mirrored from engine/verify.py (the reference re-derives them; it does not import them)
-------------------------------------------------------------------------------------------
* accept x with probability min(1, R(x)/q(x)) for q(x) > 0; for q(x) == 0 (never drawn) accept
  iff R(x) > 0; deterministic drafts: q is a point mass, so accept with probability R(x).
* residual norm(max(0, R - q)); if it is all zero, keep R (for a chain R = p).
* typical (Medusa, lossy): accept x iff p(x) > min(eps, delta * exp(-H(p))), longest accepted
  prefix/path (deepest node, ties lowest index), last token from p at the end (sampled) or argmax.

The module also holds sample-path references (``chain_loop``, ``tree_loop``, greedy ones): plain
per-row Python loops that consume given uniforms, for replaying the torch implementation.
"""
from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

# --------------------------------------------------------------------------- primitives


def accept_prob(r: float, q: float) -> float:
    """min(1, r/q); for q == 0 (an impossible draw) accept iff r > 0."""
    if q > 0:
        return min(1.0, r / q)
    return 1.0 if r > 0 else 0.0


def residual(R: np.ndarray, q: np.ndarray) -> np.ndarray:
    r = np.maximum(R - q, 0.0)
    s = r.sum()
    return r / s if s > 0 else R


def normalise(p: np.ndarray) -> np.ndarray:
    s = p.sum()
    return p / s if s > 0 else p


def entropy(p: np.ndarray) -> float:
    nz = p[p > 0]
    return float(-(nz * np.log(nz)).sum())


def typical_threshold(p: np.ndarray, eps: float, delta: float) -> float:
    return min(eps, delta * math.exp(-entropy(p)))


# --------------------------------------------------------------------------- result type


@dataclass
class ExactLaw:
    """Exact law of one verification rule on one case.

    ``steps``: blocks (node_paths, token_prefixes, P (N, V), M (N, V)), one row per history (see
    the module docstring). ``outcomes``: dict (node path, emitted tokens) -> probability, built
    lazily from ``_levels`` (chains) so that big enumerations only pay for it when asked.
    """
    steps: list = field(default_factory=list)
    _outcomes: dict = field(default_factory=lambda: defaultdict(float))
    _levels: list = field(default_factory=list)     # chain: (prefixes (N, j), term (N, V))

    def add_step(self, nodes, toks, P, M):
        self.steps.append(([nodes], [toks], np.asarray(P)[None], np.asarray(M)[None]))

    @property
    def outcomes(self) -> dict:
        while self._levels:
            prefixes, term = self._levels.pop(0)
            nodes = tuple(range(prefixes.shape[1]))
            rr, yy = np.nonzero(term > 0)
            for r, y in zip(rr.tolist(), yy.tolist()):
                key = (nodes, tuple(prefixes[r].tolist()) + (y,))
                self._outcomes[key] += float(term[r, y])
        return self._outcomes

    @property
    def total(self) -> float:
        return float(sum(t.sum() for _, t in self._levels) + sum(self._outcomes.values()))

    def length_law(self) -> dict:
        out = defaultdict(float)
        for (_, toks), pr in self.outcomes.items():
            out[len(toks)] += pr
        return dict(out)

    def expected_num_tokens(self) -> float:
        """E[num_tokens] = sum over depths j of P(at least j tokens) = the total reach mass of
        all histories (computed from ``steps``, independently of ``outcomes``)."""
        return float(sum(M.sum() for _, _, _, M in self.steps))

    def token_law(self) -> dict:
        """Law of the emitted token tuple alone (node paths summed out)."""
        out = defaultdict(float)
        for (_, toks), pr in self.outcomes.items():
            out[toks] += pr
        return dict(out)

    def first_token_law(self, V: int) -> np.ndarray:
        out = np.zeros(V)
        for (_, toks), pr in self.outcomes.items():
            out[toks[0]] += pr
        return out


def check_target_law(law: ExactLaw, rtol: float = 1e-9, atol: float = 1e-14) -> int:
    """Assert the theorem (module docstring) for every history; also that the outcome law has
    total mass 1 and never emits a token of target probability 0. Returns the number of histories
    checked."""
    assert abs(law.total - 1.0) <= 1e-12, law.total
    n = 0
    for nodes, toks, P, M in law.steps:
        s = M.sum(axis=1, keepdims=True)
        err = np.abs(M - s * P)
        bad = (err > rtol * s + atol).any(axis=1)
        if bad.any():
            r = int(np.nonzero(bad)[0][0])
            raise AssertionError(
                f"history nodes={nodes[r]} tokens={toks[r]}: mass {M[r].tolist()} vs "
                f"{float(s[r, 0])} * {P[r].tolist()}, max err {err[r].max():.3e}")
        zero = ((P == 0) & (M > 0)).any(axis=1)
        assert not zero.any(), f"emits a token of target probability 0 after {toks[int(np.nonzero(zero)[0][0])]}"
        n += int((s[:, 0] > 0).sum())
    return n


# --------------------------------------------------------------------------- chains


def chain_law(case) -> ExactLaw:
    """Exact law of ``verify_chain`` on a ChainCase (tests/strategies.py), by enumeration over all
    draft prefixes level by level (vectorised over the prefixes of one level)."""
    K, V, m = case.K, case.V, case.model
    law = ExactLaw()
    prefixes = np.zeros((1, 0), dtype=np.int64)
    reach = np.ones(1)
    for j in range(K + 1):
        keep = reach > 0
        prefixes, reach = prefixes[keep], reach[keep]
        if len(reach) == 0:
            break
        P = m.p_rows(j, prefixes)                                   # (N, V)
        if j == K:
            term = reach[:, None] * P
            law.steps.append((LazyKeys(j), prefixes, P, term))
            law._levels.append((prefixes, term))
            break
        if case.deterministic:
            Q = np.zeros_like(P)
            Q[:, case.draft_tokens[j]] = 1.0
        else:
            Q = m.q_rows(j, prefixes)
        with np.errstate(divide="ignore", invalid="ignore"):
            A = np.where(Q > 0, np.minimum(1.0, P / np.where(Q > 0, Q, 1.0)), (P > 0) * 1.0)
        acc = reach[:, None] * Q * A                                # accepted mass per token
        rej = reach * (Q * (1.0 - A)).sum(axis=1)                   # rejection mass per prefix
        Rres = np.maximum(P - Q, 0.0)
        s = Rres.sum(axis=1, keepdims=True)
        Rres = np.where(s > 0, Rres / np.where(s > 0, s, 1.0), P)
        term = rej[:, None] * Rres                                  # emitted as correction
        law.steps.append((LazyKeys(j), prefixes, P, acc + term))
        law._levels.append((prefixes, term))
        N = len(prefixes)
        prefixes = np.concatenate([np.repeat(prefixes, V, axis=0),
                                   np.tile(np.arange(V), N)[:, None]], axis=1)
        reach = acc.reshape(-1)
    return law


class LazyKeys:
    """Node paths of one chain level: position indices 0..j-1 for every row."""
    def __init__(self, j):
        self.j = j

    def __getitem__(self, r):
        return tuple(range(self.j))


# --------------------------------------------------------------------------- trees


def tree_law(case) -> ExactLaw:
    """Exact law of ``verify_tree`` on a TreeCase (tests/strategies.py).

    Sampled mode: every child c of a reached node n is drawn from its draft row independently;
    only the tokens of tried nodes matter, so the enumeration recurses over (node, token path)
    states. Topk mode: node tokens are fixed; q is a point mass.
    """
    law = ExactLaw()
    V = case.V

    def visit(node, nodes, toks, mass):
        P = case.target_row(node, list(toks))
        R = normalise(P)
        M = np.zeros(V)
        rem = mass                                  # mass of "all children so far rejected"
        for c in case.children[node + 1]:
            if rem <= 0:
                break
            if case.mode == "topk":
                x = case.tokens[c]
                a = min(1.0, R[x])
                if a > 0:
                    M[x] += rem * a
                    visit(c, nodes + (c,), toks + (x,), rem * a)
                rem *= 1.0 - a
                R = residual(R, np.eye(V)[x])
            else:
                Q = case.draft_row(c, list(toks))
                rej = 0.0
                for x in np.nonzero(Q > 0)[0]:
                    a = accept_prob(R[x], Q[x])
                    am = rem * Q[x] * a
                    if am > 0:
                        M[x] += am
                        visit(c, nodes + (c,), toks + (int(x),), am)
                    rej += Q[x] * (1.0 - a)
                rem *= rej
                R = residual(R, Q)
        if rem > 0:
            M += rem * R
            for y in np.nonzero(R > 0)[0]:
                law._outcomes[(nodes, toks + (int(y),))] += rem * R[y]
        law.add_step(nodes, toks, P, M)

    visit(-1, (), (), 1.0)
    return law


# --------------------------------------------------------------------------- typical (lossy)


def chain_typical_law(case, eps: float, delta: float, bonus: str = "sample") -> ExactLaw:
    """Exact law of Medusa typical acceptance on a ChainCase (drafts sampled or fixed)."""
    K, V, m = case.K, case.V, case.model
    law = ExactLaw()

    def last(P):
        if bonus == "greedy":
            return np.eye(V)[int(np.argmax(P))]
        return normalise(P)

    def rec(prefix, mass):
        j = len(prefix)
        P = m.p_row(j, list(prefix))
        M = np.zeros(V)
        stop = 0.0
        if j < K:
            thr = typical_threshold(P, eps, delta)
            if case.deterministic:
                Q = np.eye(V)[case.draft_tokens[j]]
            else:
                Q = m.q_row(j, list(prefix))
            for x in np.nonzero(Q > 0)[0]:
                if P[x] > thr:
                    M[x] += mass * Q[x]
                    rec(prefix + (int(x),), mass * Q[x])
                else:
                    stop += mass * Q[x]
        else:
            stop = mass
        L = last(P)
        M += stop * L
        for y in np.nonzero(L > 0)[0] if stop > 0 else ():
            law._outcomes[(tuple(range(j)), prefix + (int(y),))] += stop * L[y]
        law.add_step(tuple(range(j)), prefix, P, M)

    rec((), 1.0)
    return law


def tree_typical_path(parents, tokens, rows, eps, delta):
    """Accepted node path of typical acceptance on one fixed tree: rows[n+1] is the target row of
    node n (rows[0] the root's). Deepest accepted node, ties: lowest index."""
    depth, ok = [], []
    for i, a in enumerate(parents):
        depth.append(1 if a < 0 else depth[a] + 1)
        P = rows[a + 1]
        good = P[tokens[i]] > typical_threshold(P, eps, delta)
        ok.append(good and (a < 0 or ok[a]))
    best, bd = -1, 0
    for i in range(len(parents)):
        if ok[i] and depth[i] > bd:
            best, bd = i, depth[i]
    path = []
    n = best
    while n >= 0:
        path.append(n)
        n = parents[n]
    return path[::-1]


def tree_typical_law(case, eps: float, delta: float, bonus: str = "sample") -> ExactLaw:
    """Exact law of typical acceptance on a topk-mode TreeCase (fixed tokens)."""
    assert case.mode == "topk"
    V = case.V
    paths = [[]]
    for i, a in enumerate(case.parents):
        paths.append(paths[a + 1] + [case.tokens[i]])
    rows = [case.target_row(n - 1, paths[n]) for n in range(case.T + 1)]
    path = tree_typical_path(case.parents, case.tokens, rows, eps, delta)
    toks = tuple(case.tokens[n] for n in path)
    P = rows[path[-1] + 1] if path else rows[0]
    L = np.eye(V)[int(np.argmax(P))] if bonus == "greedy" else normalise(P)
    law = ExactLaw()
    for y in np.nonzero(L > 0)[0]:
        law._outcomes[(tuple(path), toks + (int(y),))] += float(L[y])
    return law


def total_variation(a: np.ndarray, b: np.ndarray) -> float:
    return 0.5 * float(np.abs(np.asarray(a) - np.asarray(b)).sum())


# --------------------------------------------------------------------------- theory


def chain_expected_tokens(alpha: float, K: int) -> float:
    """E[num_tokens] for a chain with acceptance rate alpha at every position:
    (1 - alpha^(K+1)) / (1 - alpha), = K + 1 at alpha = 1. Evaluated as the equal finite sum
    1 + alpha + ... + alpha^K, which has no cancellation when alpha is near 1."""
    return float(sum(alpha ** n for n in range(K + 1)))


def chain_length_law(alpha: float, K: int) -> np.ndarray:
    """P(num_tokens = n) for n = 1..K+1 (index n-1) with constant acceptance rate alpha."""
    out = np.array([alpha ** (n - 1) * (1 - alpha) for n in range(1, K + 1)] + [alpha ** K])
    return out


# --------------------------------------------------------------------------- sample-path loops


def inverse_cdf(w, u: float) -> int:
    """First index whose running sum exceeds u * total (threshold clamped below the total),
    summing left to right; mirrors engine.verify._sample_inverse_cdf."""
    c, cs = 0.0, []
    for a in w:
        c += float(a)
        cs.append(c)
    total = cs[-1]
    t = min(float(u) * total, float(np.nextafter(total, -np.inf)))
    for i, ci in enumerate(cs):
        if ci > t:
            return i
    return len(cs) - 1


def _norm_or(r, fallback):
    s = float(np.sum(r))
    return r / s if s > 0 else fallback


def chain_loop(p, q, x, u_accept, u_sample):
    """Per-row, per-position Python reference of verify_chain with given uniforms.
    p (B, K+1, V), q (B, K, V) or None, x (B, K), u_accept (B, K), u_sample (B,) numpy float64.
    Returns (tokens list of lists, num_tokens list)."""
    B, K1, V = p.shape
    K = K1 - 1
    all_tokens, nums = [], []
    for b in range(B):
        out = []
        for j in range(K):
            xj = int(x[b, j])
            qx = 1.0 if q is None else float(q[b, j, xj])
            if float(u_accept[b, j]) * qx < float(p[b, j, xj]):
                out.append(xj)
                continue
            if q is None:
                r = p[b, j].copy()
                r[xj] = 0.0
            else:
                r = np.maximum(p[b, j] - q[b, j], 0.0)
            w = r if r.sum() > 0 else p[b, j]
            out.append(inverse_cdf(w, u_sample[b]))
            break
        else:
            out.append(inverse_cdf(p[b, K], u_sample[b]))
        nums.append(len(out))
        all_tokens.append(out + [-1] * (K1 - len(out)))
    return all_tokens, nums


def tree_loop(p, q, toks, parents, u_accept, u_sample):
    """Per-row Python reference of verify_tree with given uniforms (children in ascending index).

    Mirrors the implementation's arithmetic: the residual R is kept unnormalised with mass
    Z = sum(R); child x is accepted iff u * q(x) * Z < R(x) (q(x) = 1 for deterministic children);
    a rejection zeroes R(x) (deterministic) or sets R = max(0, R - Z q) (sampled), keeping the old
    R if nothing is left. Returns (tokens list of lists, num_tokens list, paths list of lists),
    padded like torch.
    """
    B, T1, V = p.shape
    children = [[] for _ in range(T1)]
    depth = []
    for i, a in enumerate(parents):
        children[a + 1].append(i)
        depth.append(1 if a < 0 else depth[a] + 1)
    D = max(depth, default=0)
    rows_t, nums, paths = [], [], []
    for b in range(B):
        node, out, path = -1, [], []
        R = p[b, 0].copy()
        Z = float(R.sum())
        moved = True
        while moved:
            moved = False
            for c in children[node + 1]:
                x = int(toks[b, c])
                Rx = float(R[x])
                if q is None:
                    ok = float(u_accept[b, c]) * Z < Rx
                else:
                    ok = float(u_accept[b, c]) * float(q[b, c, x]) * Z < Rx
                if ok:
                    node = c
                    out.append(x)
                    path.append(c)
                    R = p[b, c + 1].copy()
                    Z = float(R.sum())
                    moved = True
                    break
                if q is None:
                    R[x] = 0.0
                    Znew = float(R.sum())
                    if Znew <= 0:
                        R[x] = Rx
                    else:
                        Z = Znew
                else:
                    R = np.maximum(R + q[b, c] * (-Z), 0.0)
                    Znew = float(R.sum())
                    if Znew <= 0:
                        R = R + q[b, c] * Z
                    else:
                        Z = Znew
        out.append(inverse_cdf(R, u_sample[b]))
        nums.append(len(out))
        rows_t.append(out + [-1] * (D + 1 - len(out)))
        paths.append(path + [-1] * (D - len(path)))
    return rows_t, nums, paths


def chain_greedy_loop(logits, x):
    """Per-row greedy chain reference: longest prefix of drafts equal to the argmax, then the
    argmax at the next position."""
    B, K1, _ = logits.shape
    res, nums = [], []
    for b in range(B):
        out = []
        for j in range(K1):
            a = int(np.argmax(logits[b, j]))
            if j < K1 - 1 and int(x[b, j]) == a:
                out.append(a)
                continue
            out.append(a)
            break
        nums.append(len(out))
        res.append(out + [-1] * (K1 - len(out)))
    return res, nums


def tree_greedy_loop(logits, toks, parents):
    """Per-row greedy tree reference: enumerate every node whose whole root path matches the
    argmax of its parent's row; take the deepest (lowest index on ties); bonus = argmax at it."""
    B, T1, _ = logits.shape
    depth = []
    for a in parents:
        depth.append(1 if a < 0 else depth[a] + 1)
    D = max(depth, default=0)
    res, nums, paths = [], [], []
    for b in range(B):
        best, bd = -1, 0
        for i in range(T1 - 1):
            n, good = i, True
            while n >= 0:
                if int(toks[b, n]) != int(np.argmax(logits[b, parents[n] + 1])):
                    good = False
                    break
                n = parents[n]
            if good and depth[i] > bd:
                best, bd = i, depth[i]
        path, n = [], best
        while n >= 0:
            path.append(n)
            n = parents[n]
        path = path[::-1]
        out = [int(toks[b, n]) for n in path] + [int(np.argmax(logits[b, best + 1]))]
        nums.append(len(out))
        res.append(out + [-1] * (D + 1 - len(out)))
        paths.append(path + [-1] * (D - len(path)))
    return res, nums, paths
