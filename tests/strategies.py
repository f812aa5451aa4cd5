"""Shared Hypothesis strategies and toy 'language models' for the verification tests.

A test case is a small vocabulary (2..8 tokens), a draft length K (1..5) or a token tree (up to
12 nodes, given as parent indices), and a *pool model*: a few target distributions p and draft
distributions q, chosen per context by hashing the context. With ``prefix_dependent`` the context
includes the tokens on the path, so p and q depend on the path as in a real autoregressive model;
without it they depend only on the position (chains) or node (trees), the textbook setting.

p and q at the same context share one pool index, so the pair relations drawn by ``dist_pairs``
(p == q, disjoint supports, one-hot, near-degenerate, ...) hold at every context where a target
row and the draft distribution of its children meet.

Conventions (used by tests/verify_exact.py and the torch tests alike):

* Chain, position j = 0..K: target p_j(. | x_<j) = model.p_rows(j, x[:, :j]); draft
  q_j(. | x_<j) = model.q_rows(j, x[:, :j]) for j < K.
* Tree, node n (-1 = root) with token path y (tokens of the nodes root -> n):
  target row = model.p_rows(n + 1, y). The draft distribution of a child c of n is
  model.q_rows(n + 1, y) with shared sibling distributions (the usual drafter), or
  model.q_rows(DISTINCT_KEY + c, y) with ``sibling_q == "distinct"`` (each child its own q).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from hypothesis import strategies as st

_M = 2_147_483_647          # a prime below 2**31: products with 1_000_003 stay inside int64
DISTINCT_KEY = 1000

# --------------------------------------------------------------------------- distributions

TINY = (1e-12, 1e-9, 1e-6, 1e-3)
DIST_KINDS = ("random", "sparse", "one_hot", "near_degenerate", "uniform")


def _normalise(w: np.ndarray) -> np.ndarray:
    w = np.asarray(w, dtype=np.float64)
    return w / w.sum()


@st.composite
def distributions(draw, V: int, kind: str | None = None, support=None):
    """A probability vector of length V (float64, sums to 1 up to rounding).

    kind: random (weights, some of them exactly 0), sparse (random support), one_hot,
    near_degenerate (1 - eps on one token, eps spread over others, eps down to 1e-12), uniform.
    support: optional list of allowed token ids (others get probability 0).
    """
    allowed = list(range(V)) if support is None else list(support)
    assert allowed
    kind = kind or draw(st.sampled_from(DIST_KINDS))
    w = np.zeros(V)
    if kind == "one_hot" or len(allowed) == 1:
        w[draw(st.sampled_from(allowed))] = 1.0
    elif kind == "uniform":
        w[allowed] = 1.0
    elif kind == "near_degenerate":
        top = draw(st.sampled_from(allowed))
        eps = draw(st.sampled_from(TINY))
        rest = [a for a in allowed if a != top]
        w[top] = 1.0 - eps
        w[rest] = eps / len(rest)
    elif kind == "sparse":
        sub = draw(st.lists(st.sampled_from(allowed), min_size=1, max_size=len(allowed),
                            unique=True))
        for a in sub:
            w[a] = draw(st.floats(0.05, 1.0))
    else:  # random, zeros allowed
        vals = draw(st.lists(st.one_of(st.just(0.0), st.floats(1e-3, 1.0)),
                             min_size=len(allowed), max_size=len(allowed)))
        w[allowed] = vals
        if w.sum() <= 0:
            w[draw(st.sampled_from(allowed))] = 1.0
    return _normalise(w)


PAIR_RELATIONS = ("independent", "equal", "disjoint", "perturbed", "one_hot_q", "one_hot_p")


@st.composite
def dist_pairs(draw, V: int, relation: str | None = None):
    """(p, q, relation): target and draft distributions related in one of PAIR_RELATIONS."""
    relation = relation or draw(st.sampled_from(PAIR_RELATIONS))
    if relation == "disjoint":
        perm = draw(st.permutations(range(V)))
        cut = draw(st.integers(1, V - 1))
        p = draw(distributions(V, support=perm[:cut]))
        q = draw(distributions(V, support=perm[cut:]))
    elif relation == "equal":
        p = draw(distributions(V))
        q = p.copy()
    elif relation == "perturbed":
        p = draw(distributions(V))
        other = draw(distributions(V))
        lam = draw(st.sampled_from((1e-9, 1e-4, 0.01, 0.3)))
        q = _normalise((1 - lam) * p + lam * other)
    elif relation == "one_hot_q":
        p = draw(distributions(V))
        q = draw(distributions(V, kind="one_hot"))
    elif relation == "one_hot_p":
        p = draw(distributions(V, kind="one_hot"))
        q = draw(distributions(V))
    else:
        p = draw(distributions(V))
        q = draw(distributions(V))
    return p, q, relation


# --------------------------------------------------------------------------- pool models

def context_hash(salt: int, key: int, paths: np.ndarray) -> np.ndarray:
    """Deterministic hash of (salt, key, each row of paths (N, L) int) -> (N,) int64."""
    paths = np.asarray(paths, dtype=np.int64).reshape(len(paths), -1)
    h = np.full(len(paths), (salt * 1_000_003 + key + 7) % _M, dtype=np.int64)
    for c in range(paths.shape[1]):
        h = (h * 1_000_003 + paths[:, c] + 1) % _M
    return h


@dataclass
class PoolModel:
    """Toy target/draft model: the distribution at a context is pool[hash(context) % n]."""
    p_pool: np.ndarray                  # (n, V)
    q_pool: np.ndarray                  # (n, V)
    prefix_dependent: bool
    salt: int = 0

    @property
    def V(self) -> int:
        return self.p_pool.shape[1]

    def index(self, key: int, paths) -> np.ndarray:
        paths = np.asarray(paths, dtype=np.int64)
        if paths.ndim == 1:
            paths = paths.reshape(1, -1)
        if not self.prefix_dependent:
            paths = paths[:, :0]
        return context_hash(self.salt, key, paths) % len(self.p_pool)

    def p_rows(self, key: int, paths) -> np.ndarray:
        return self.p_pool[self.index(key, paths)]

    def q_rows(self, key: int, paths) -> np.ndarray:
        return self.q_pool[self.index(key, paths)]

    def p_row(self, key: int, path) -> np.ndarray:
        return self.p_rows(key, np.asarray(path, dtype=np.int64).reshape(1, -1))[0]

    def q_row(self, key: int, path) -> np.ndarray:
        return self.q_rows(key, np.asarray(path, dtype=np.int64).reshape(1, -1))[0]


@st.composite
def pool_models(draw, V: int, max_pool: int = 3, relation: str | None = None,
                prefix_dependent: bool | None = None):
    n = draw(st.integers(1, max_pool))
    pairs = [draw(dist_pairs(V, relation)) for _ in range(n)]
    pd = draw(st.booleans()) if prefix_dependent is None else prefix_dependent
    return PoolModel(np.stack([a for a, _, _ in pairs]), np.stack([b for _, b, _ in pairs]),
                     pd, draw(st.integers(0, 2 ** 16)))


# --------------------------------------------------------------------------- chains

@dataclass
class ChainCase:
    K: int
    V: int
    model: PoolModel
    draft_tokens: list | None = None     # fixed drafts (deterministic drafter), else sampled

    @property
    def deterministic(self) -> bool:
        return self.draft_tokens is not None


@st.composite
def chain_cases(draw, deterministic: bool | None = None, max_K: int = 5, max_V: int = 8):
    K = draw(st.integers(1, max_K))
    V = draw(st.integers(2, max_V))
    model = draw(pool_models(V))
    det = draw(st.booleans()) if deterministic is None else deterministic
    toks = None
    if det:
        how = draw(st.sampled_from(("argmax", "arbitrary")))
        if how == "argmax":           # a greedy drafter: x_j = argmax q_j(. | x_<j)
            toks = []
            for j in range(K):
                toks.append(int(np.argmax(model.q_row(j, toks))))
        else:
            toks = draw(st.lists(st.integers(0, V - 1), min_size=K, max_size=K))
    return ChainCase(K, V, model, toks)


# --------------------------------------------------------------------------- trees

@st.composite
def tree_parents(draw, max_nodes: int = 12, max_depth: int = 12, min_nodes: int = 1):
    """Random parent list: parents[i] in {-1} U {j < i with depth(j) < max_depth}."""
    T = draw(st.integers(min_nodes, max_nodes))
    parents, depth = [], []
    for i in range(T):
        choices = [-1] + [j for j in range(i) if depth[j] < max_depth]
        a = draw(st.sampled_from(choices))
        parents.append(a)
        depth.append(1 if a < 0 else depth[a] + 1)
    return parents


def tree_depths(parents):
    d = []
    for a in parents:
        d.append(1 if a < 0 else d[a] + 1)
    return d


def tree_paths(parents):
    """For each node, the list of nodes root -> node (inclusive)."""
    out = []
    for i, a in enumerate(parents):
        out.append(([] if a < 0 else list(out[a])) + [i])
    return out


@dataclass
class TreeCase:
    parents: list
    V: int
    model: PoolModel
    mode: str                    # "sampled" | "topk"
    sibling_q: str = "shared"    # "shared" | "distinct" (sampled mode)
    tokens: list | None = None   # fixed node tokens (topk mode)
    children: list = field(init=False)

    def __post_init__(self):
        self.children = [[] for _ in range(len(self.parents) + 1)]   # index node+1
        for i, a in enumerate(self.parents):
            self.children[a + 1].append(i)

    @property
    def T(self) -> int:
        return len(self.parents)

    def target_row(self, node: int, path_tokens) -> np.ndarray:
        return self.model.p_row(node + 1, path_tokens)

    def target_rows(self, node: int, paths) -> np.ndarray:
        return self.model.p_rows(node + 1, paths)

    def draft_key(self, child: int) -> int:
        if self.sibling_q == "distinct":
            return DISTINCT_KEY + child
        return self.parents[child] + 1

    def draft_row(self, child: int, parent_path_tokens) -> np.ndarray:
        return self.model.q_row(self.draft_key(child), parent_path_tokens)

    def draft_rows(self, child: int, paths) -> np.ndarray:
        return self.model.q_rows(self.draft_key(child), paths)


def topk_tokens(parents, model: PoolModel):
    """Deterministic top-k children: the r-th child of node n gets the r-th most probable token of
    the draft distribution at n (stable order; wraps around if a node has more than V children)."""
    toks, rank = [], {}
    paths = tree_paths(parents)
    for i, a in enumerate(parents):
        r = rank.get(a, 0)
        rank[a] = r + 1
        par_path = [] if a < 0 else [toks[j] for j in paths[a]]
        q = model.q_row(a + 1, par_path)
        order = np.argsort(-q, kind="stable")
        toks.append(int(order[r % len(order)]))
    return toks


def sampled_tree_cost(parents, V: int) -> int:
    """Number of (node, token path) states the exact enumeration of a sampled tree visits, at
    most: sum over the root and the internal nodes of V ** depth."""
    d = tree_depths(parents)
    internal = {a for a in parents if a >= 0}
    return 1 + sum(V ** d[n] for n in internal)


@st.composite
def tree_cases(draw, mode: str | None = None, max_nodes: int = 12, budget: int = 3000):
    mode = mode or draw(st.sampled_from(("sampled", "topk")))
    if mode == "sampled":
        parents = draw(tree_parents(max_nodes=max_nodes, max_depth=draw(st.integers(1, 6))))
        vmax = max([v for v in range(2, 9) if sampled_tree_cost(parents, v) <= budget],
                   default=2)
        V = draw(st.integers(2, vmax))
        model = draw(pool_models(V))
        return TreeCase(parents, V, model, "sampled",
                        sibling_q=draw(st.sampled_from(("shared", "distinct"))))
    parents = draw(tree_parents(max_nodes=max_nodes))
    V = draw(st.integers(2, 8))
    model = draw(pool_models(V))
    if draw(st.booleans()):
        toks = topk_tokens(parents, model)
    else:
        toks = draw(st.lists(st.integers(0, V - 1), min_size=len(parents),
                             max_size=len(parents)))
    return TreeCase(parents, V, model, "topk", tokens=toks)


# --------------------------------------------------------------------------- batch builders

def sample_from_rows(rows: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One token per row of probability rows (N, V) by inverse CDF."""
    c = np.cumsum(rows, axis=1)
    u = rng.random(len(rows)) * c[:, -1]
    idx = (c <= u[:, None]).sum(axis=1)
    return np.minimum(idx, rows.shape[1] - 1)


def chain_batch(case: ChainCase, B: int, rng: np.random.Generator):
    """Draw B draft chains from the case's drafter; return numpy (p (B,K+1,V), q (B,K,V) or None,
    x (B,K))."""
    K, V, m = case.K, case.V, case.model
    x = np.zeros((B, K), dtype=np.int64)
    q = None if case.deterministic else np.zeros((B, K, V))
    for j in range(K):
        if case.deterministic:
            x[:, j] = case.draft_tokens[j]
        else:
            q[:, j] = m.q_rows(j, x[:, :j])
            x[:, j] = sample_from_rows(q[:, j], rng)
    p = np.stack([m.p_rows(j, x[:, :j]) for j in range(K + 1)], axis=1)
    return p, q, x


def tree_batch(case: TreeCase, B: int, rng: np.random.Generator):
    """Draw B token trees (sampled mode) or repeat the fixed one (topk mode); return numpy
    (p (B,T+1,V), q (B,T,V) or None, tokens (B,T))."""
    T, V = case.T, case.V
    paths = tree_paths(case.parents)
    toks = np.zeros((B, T), dtype=np.int64)
    q = None if case.mode == "topk" else np.zeros((B, T, V))
    for i, a in enumerate(case.parents):
        if case.mode == "topk":
            toks[:, i] = case.tokens[i]
        else:
            par = toks[:, paths[a]] if a >= 0 else toks[:, :0]
            q[:, i] = case.draft_rows(i, par)
            toks[:, i] = sample_from_rows(q[:, i], rng)
    p = np.zeros((B, T + 1, V))
    p[:, 0] = case.target_rows(-1, toks[:, :0])
    for i in range(T):
        p[:, i + 1] = case.target_rows(i, toks[:, paths[i]])
    return p, q, toks
