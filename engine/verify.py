"""Verification rules for speculative decoding, batched in torch (CPU or GPU; no device code).

Lossless rules (the emitted tokens are distributed exactly as the target model's):

* ``verify_chain``: speculative sampling (Leviathan et al. 2023; Chen et al. 2023). For drafts
  x_1..x_K drawn from q_1..q_K, accept x_j with probability min(1, p_j(x_j)/q_j(x_j)); at the
  first rejection emit a token from norm(max(0, p_j - q_j)) and stop; if every draft is accepted
  emit a bonus token from p_{K+1}.
* ``verify_tree``: multi-step speculative sampling over a token tree (SpecInfer, Miao et al.
  2023). At each node the children are tried in ascending node index; child c (token x) is
  accepted with probability min(1, R(x)/q_c(x)) where R starts as the target distribution at the
  node and after each rejection becomes norm(max(0, R - q_c)). With deterministic children
  (``draft_probs=None``, e.g. top-k) q_c is a point mass on x, so the rule is: accept with
  probability R(x), else set R(x) = 0 and renormalise. When all children are rejected (or the
  node is a leaf) a token is emitted from R and the walk stops.

Greedy rules (temperature 0): ``verify_chain_greedy`` and ``verify_tree_greedy``.

LOSSY rule: ``verify_tree_typical_lossy`` / ``verify_chain_typical_lossy`` (Medusa's typical
acceptance). Its output is NOT distributed as the target's; it trades exactness for length.

Conventions shared by every function here
-----------------------------------------
* Probabilities are given, not logits (use ``engine.sampling.warp`` on target and draft logits
  alike). Half-precision inputs are computed in float32; float32/float64 in their own dtype.
* Outputs: ``tokens`` (B, D+1) int64, where D is the number of draft positions (K for a chain,
  the tree depth for a tree); row b holds the emitted tokens in ``tokens[b, :num_tokens[b]]``
  (accepted drafts, then one correction/bonus token) and -1 after. ``num_tokens`` (B,) int64 is in
  [1, D+1]. Tree functions also return ``path`` (B, D) int64: the accepted node indices in depth
  order, padded with -1 (``num_tokens - 1`` of them are valid).
* Randomness: one uniform per draft position/node for acceptance and one per row for the final
  token, drawn with ``torch.rand`` from ``generator`` (which must live on the tensors' device).
  The private ``_verify_chain_uniforms`` / ``_verify_tree_uniforms`` take those uniforms
  explicitly, so a per-row Python reference can replay the same random numbers.
* Acceptance test: draft token x is accepted iff ``u * q(x) < p(x)`` with u ~ U[0, 1). For q(x)>0
  that is probability min(1, p(x)/q(x)). For q(x) = 0 (an impossible draw under q, which only an
  inconsistent drafter can produce) it accepts iff p(x) > 0. Such draws have probability zero
  under q, so what is done with them cannot change the output law; the rule chosen never emits a
  token the target gives probability 0. Trees keep the running residual R unnormalised with mass
  Z = sum(R) and test ``u * q(x) * Z < R(x)`` (the same probability, min(1, (R(x)/Z) / q(x))).
* Sampling a token from weights w uses the inverse CDF: the first index whose cumulative weight
  exceeds u * sum(w). A token of weight 0 is never returned. If the residual max(0, p - q) is all
  zero (p == q, where rejection has probability 0 and only rounding can get there), the token is
  drawn from the distribution R held before the update (for a chain: p) instead of dividing by 0.
"""
from __future__ import annotations

import torch

__all__ = [
    "verify_chain",
    "verify_tree",
    "verify_chain_greedy",
    "verify_tree_greedy",
    "verify_chain_typical_lossy",
    "verify_tree_typical_lossy",
    "chain_parents",
    "typical_threshold",
]


# --------------------------------------------------------------------------- helpers

def _as_float(t: torch.Tensor, name: str) -> torch.Tensor:
    if not torch.is_floating_point(t):
        raise TypeError(f"{name} must be a floating-point tensor, got {t.dtype}")
    if t.dtype in (torch.float16, torch.bfloat16):
        return t.float()
    return t


def _sample_inverse_cdf(w: torch.Tensor, u: torch.Tensor, inplace: bool = False) -> torch.Tensor:
    """Index drawn from non-negative weights w (B, V) with uniforms u (B,) in [0, 1).

    Returns the first index i with cumsum(w)[i] > u * total. With ``inplace`` the cumulative
    sums overwrite w (saves a (B, V) buffer).
    """
    c = w.cumsum_(dim=-1) if inplace else torch.cumsum(w, dim=-1)
    return _sample_from_cumsum(c, u)


def _sample_from_cumsum(c: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Inverse-CDF draw from cumulative weights c (B, V). The threshold u * total is clamped
    below the total, so the index is always < V and its weight is > 0 (if total > 0)."""
    total = c[:, -1:]
    t = u.to(c.dtype).unsqueeze(-1) * total
    t = torch.minimum(t, torch.nextafter(total, torch.full_like(total, float("-inf"))))
    return torch.searchsorted(c, t.contiguous(), right=True).squeeze(-1).clamp_(max=c.shape[-1] - 1)


def _select_rows(t: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """t (B, N, V), idx (B,) -> t[b, idx[b]] (B, V) as a new tensor (index_select when t is
    contiguous: one row copy per b)."""
    B, N, V = t.shape
    if t.is_contiguous():
        flat = torch.arange(B, device=t.device) * N + idx
        return t.view(B * N, V).index_select(0, flat)
    return t[torch.arange(B, device=t.device), idx]


def chain_parents(K: int) -> list[int]:
    """Parent list of a chain of K nodes seen as a tree: [-1, 0, 1, ..., K-2]."""
    return list(range(-1, K - 1))


def _check_parents(parents, T: int) -> list[int]:
    if isinstance(parents, torch.Tensor):
        parents = parents.tolist()
    parents = [int(a) for a in parents]
    if len(parents) != T:
        raise ValueError(f"parents has length {len(parents)}, expected T={T}")
    for i, a in enumerate(parents):
        if not -1 <= a < i:
            raise ValueError(f"parents[{i}]={a}: need -1 <= parents[i] < i")
    return parents


def _tree_tables(parents: list[int]):
    """depth[i] (1 for children of the root) and the ancestor table.

    anc[n + 1] lists the nodes on the path root -> n (depth order), padded with -1 to length D;
    anc[0] (the root) is all -1. Returned as Python lists.
    """
    depth = []
    for i, a in enumerate(parents):
        depth.append(1 if a < 0 else depth[a] + 1)
    D = max(depth, default=0)
    anc = [[-1] * D]
    for i, a in enumerate(parents):
        row = list(anc[a + 1])
        row[depth[i] - 1] = i
        anc.append(row)
    return depth, D, anc


# --------------------------------------------------------------------------- chain

def _verify_chain_uniforms(target_probs, draft_probs, draft_tokens, u_accept, u_sample):
    """``verify_chain`` with its random numbers given.

    u_accept (B, K) in [0, 1): draft j of row b is accepted iff u_accept[b, j] * q < p.
    u_sample (B,) in [0, 1): inverse-CDF uniform of the correction/bonus token.
    """
    p = target_probs
    B, K1, V = p.shape
    K = K1 - 1
    x = draft_tokens

    if K > 0:
        px = p[:, :K].gather(-1, x.unsqueeze(-1)).squeeze(-1)                  # (B, K)
        if draft_probs is None:
            acc = u_accept.to(p.dtype) < px
        else:
            qx = draft_probs.gather(-1, x.unsqueeze(-1)).squeeze(-1)
            acc = u_accept.to(p.dtype) * qx < px
        n_acc = acc.to(torch.int64).cumprod(dim=-1).sum(dim=-1)                 # (B,)
    else:
        n_acc = torch.zeros(B, dtype=torch.int64, device=p.device)

    # One (B, V) row per batch row: the distribution the last token is drawn from. Built with
    # as few full passes and buffers as possible (this is the memory-bound part).
    w = _select_rows(p, n_acc)                          # (B, V) copy: p at the stop position
    fallback_tok = None
    if K > 0:
        not_full = n_acc < K
        j = n_acc.clamp(max=K - 1)
        if draft_probs is None:
            # residual max(0, p - point mass at x_j) is p with x_j's entry zeroed
            xj = x.gather(1, j.unsqueeze(-1))
            wx = w.gather(1, xj)
            w.scatter_(1, xj, torch.where(not_full.unsqueeze(-1), 0.0, wx))
            # if nothing is left, p was a point mass on x_j: the fallback p emits x_j itself
            fallback_tok = xj.squeeze(-1)
        else:
            q_sel = _select_rows(draft_probs, j)        # (B, V) copy
            coef = torch.where(not_full, -1.0, 0.0).to(p.dtype).unsqueeze(-1)
            p_sel = w
            w = torch.addcmul(p_sel, q_sel, coef, out=q_sel).clamp_min_(0.0)   # p - q, or p
            c = w.cumsum_(dim=-1)
            bad = c[:, -1] <= 0
            if bool(bad.any()):     # p == q: rejection had probability 0; fall back to p
                c[bad] = p_sel[bad].cumsum(dim=-1)
            return _chain_output(x, n_acc, _sample_from_cumsum(c, u_sample))
    c = w.cumsum_(dim=-1)
    y = _sample_from_cumsum(c, u_sample)
    if fallback_tok is not None:
        bad = (c[:, -1] <= 0) & not_full
        y = torch.where(bad, fallback_tok, y)
    return _chain_output(x, n_acc, y)


def _chain_output(x, n_acc, y):
    B, K = x.shape
    pos = torch.arange(K + 1, device=x.device)
    x_pad = torch.cat([x, torch.full((B, 1), -1, dtype=torch.int64, device=x.device)], dim=1)
    tokens = torch.where(pos < n_acc.unsqueeze(-1), x_pad, -1)
    tokens = torch.where(pos == n_acc.unsqueeze(-1), y.unsqueeze(-1), tokens)
    return tokens, n_acc + 1


def _check_chain_args(target_probs, draft_probs, draft_tokens):
    p = _as_float(target_probs, "target_probs")
    if p.dim() != 3:
        raise ValueError(f"target_probs must be (B, K+1, V), got {tuple(p.shape)}")
    B, K1, V = p.shape
    K = K1 - 1
    if K < 0:
        raise ValueError("target_probs needs at least one position")
    x = draft_tokens.to(device=p.device, dtype=torch.int64)
    if tuple(x.shape) != (B, K):
        raise ValueError(f"draft_tokens must be (B, K)=({B}, {K}), got {tuple(x.shape)}")
    q = None
    if draft_probs is not None:
        q = _as_float(draft_probs, "draft_probs").to(p.dtype)
        if tuple(q.shape) != (B, K, V):
            raise ValueError(f"draft_probs must be (B, K, V)=({B}, {K}, {V}), got {tuple(q.shape)}")
    return p, q, x


def verify_chain(target_probs, draft_probs, draft_tokens, generator=None):
    """Speculative sampling of a chain of K drafts; lossless.

    target_probs (B, K+1, V): p_1..p_{K+1}, row j the target's distribution after the committed
    prefix and the first j drafts. draft_probs (B, K, V): q_1..q_K the drafts were sampled from,
    or None for deterministic drafts (q_j is a point mass on draft_tokens[:, j]). draft_tokens
    (B, K) int64.

    Returns (tokens (B, K+1) int64 padded with -1, num_tokens (B,) int64 in [1, K+1]);
    tokens[b, :num_tokens[b]] are the accepted drafts then the correction or bonus token.
    ``generator``: optional torch.Generator on the tensors' device.
    Vectorised over B and K (no Python loop). With draft_probs given it synchronises once with
    the host (to check whether any row needs the p == q fallback); verify_tree never does.
    """
    p, q, x = _check_chain_args(target_probs, draft_probs, draft_tokens)
    B, K1, _ = p.shape
    u_accept = torch.rand((B, K1 - 1), generator=generator, device=p.device, dtype=p.dtype)
    u_sample = torch.rand((B,), generator=generator, device=p.device, dtype=p.dtype)
    return _verify_chain_uniforms(p, q, x, u_accept, u_sample)


# --------------------------------------------------------------------------- tree

def _verify_tree_uniforms(target_probs, draft_probs, tree_tokens, parents, u_accept, u_sample):
    """``verify_tree`` with its random numbers given: u_accept (B, T) (one per node, used only if
    the node is tried), u_sample (B,) (the final token). Returns (tokens, num_tokens, path)."""
    p = target_probs
    B, T1, V = p.shape
    T = T1 - 1
    depth, D, _ = _tree_tables(parents)
    dev = p.device
    u_accept = u_accept.to(p.dtype)

    # R is the running residual at the current node, kept unnormalised with mass Z (so the
    # normalised residual is R / Z): a rejection of a deterministic child then touches one entry
    # per row, and a sampled child's update max(0, R/Z - q) is done as max(0, R - Z q).
    cur = torch.full((B,), -1, dtype=torch.int64, device=dev)      # current node (-1 = root)
    Zp = p.sum(dim=-1)                                              # (B, T+1) row masses
    R = p[:, 0].clone()
    Z = Zp[:, 0].clone()
    tokens = torch.full((B, D + 1), -1, dtype=torch.int64, device=dev)
    path = torch.full((B, D), -1, dtype=torch.int64, device=dev)
    n_acc = torch.zeros(B, dtype=torch.int64, device=dev)

    for i in range(T):
        par = parents[i]
        active = cur == par                                          # rows trying node i now
        x = tree_tokens[:, i:i + 1]
        Rx = R.gather(1, x).squeeze(-1)
        if draft_probs is None:
            acc = u_accept[:, i] * Z < Rx                           # prob R(x) / Z
            drop = active & ~acc
            R.scatter_(1, x, torch.where(drop, 0.0, Rx).unsqueeze(-1))
            Znew = R.sum(dim=-1)
            # nothing left: R was a point mass on x (rejected with probability 0); keep R
            bad = drop & (Znew <= 0)
            R.scatter_(1, x, torch.where(bad | ~drop, Rx, 0.0).unsqueeze(-1))
        else:
            q = draft_probs[:, i]
            qx = q.gather(1, x).squeeze(-1)
            acc = u_accept[:, i] * qx * Z < Rx                      # prob min(1, R(x)/(Z q(x)))
            drop = active & ~acc
            R.addcmul_(q, torch.where(drop, -Z, 0.0).unsqueeze(-1)).clamp_min_(0.0)
            Znew = R.sum(dim=-1)
            # nothing left: R/Z <= q everywhere, i.e. R/Z == q (rejection had probability 0);
            # keep R, which is Z q
            bad = drop & (Znew <= 0)
            R.addcmul_(q, torch.where(bad, Z, 0.0).unsqueeze(-1))
        Z = torch.where(bad, Z, Znew)
        take = active & acc
        torch.where(take.unsqueeze(-1), p[:, i + 1], R, out=R)
        Z = torch.where(take, Zp[:, i + 1], Z)
        cur = torch.where(take, i, cur)
        d = depth[i] - 1
        tokens[:, d] = torch.where(take, x.squeeze(-1), tokens[:, d])
        path[:, d] = torch.where(take, i, path[:, d])
        n_acc = n_acc + take.to(torch.int64)

    y = _sample_inverse_cdf(R, u_sample, inplace=True)
    tokens.scatter_(1, n_acc.unsqueeze(-1), y.unsqueeze(-1))
    return tokens, n_acc + 1, path


def _check_tree_args(target_probs, draft_probs, tree_tokens, parents):
    p = _as_float(target_probs, "target_probs")
    if p.dim() != 3:
        raise ValueError(f"target_probs must be (B, T+1, V), got {tuple(p.shape)}")
    B, T1, V = p.shape
    T = T1 - 1
    if T < 0:
        raise ValueError("target_probs needs at least the root row")
    parents = _check_parents(parents, T)
    x = tree_tokens.to(device=p.device, dtype=torch.int64)
    if tuple(x.shape) != (B, T):
        raise ValueError(f"tree_tokens must be (B, T)=({B}, {T}), got {tuple(x.shape)}")
    q = None
    if draft_probs is not None:
        q = _as_float(draft_probs, "draft_probs").to(p.dtype)
        if tuple(q.shape) != (B, T, V):
            raise ValueError(f"draft_probs must be (B, T, V)=({B}, {T}, {V}), got {tuple(q.shape)}")
    return p, q, x, parents


def verify_tree(target_probs, draft_probs, tree_tokens, parents, generator=None):
    """Multi-step speculative sampling over a token tree (SpecInfer); lossless.

    The tree is the same for every row: ``parents`` (list of T ints, or a 1-D tensor) with
    parents[i] = -1 for a child of the root and parents[i] < i otherwise. Children of a node are
    tried in ascending node index.

    target_probs (B, T+1, V): row 0 is the target's distribution after the committed prefix (the
    root), row i+1 the target's distribution after the path root -> node i.
    draft_probs (B, T, V) or None. Given: draft_probs[b, i] is the distribution node i's token was
    drawn from (for a usual drafter, the draft distribution at node i's parent, so siblings share
    it). Children of a node must be drawn independently of each other (with replacement); they
    may come from different distributions. None: deterministic children (e.g. the draft's top-k);
    q is then a point mass on the node's token.
    tree_tokens (B, T) int64: the token of each node.

    Returns (tokens (B, D+1) int64 padded -1, num_tokens (B,) int64 in [1, D+1],
    path (B, D) int64 padded -1), D the tree depth (0 for an empty tree): path[b, :num_tokens-1]
    are the accepted nodes, tokens[b, :num_tokens-1] their tokens, tokens[b, num_tokens-1] the
    token drawn from the residual at the last accepted node (the target row itself at a leaf).

    Batched over B; a Python loop over the T nodes (each step is O(B*V) tensor work).
    """
    p, q, x, parents = _check_tree_args(target_probs, draft_probs, tree_tokens, parents)
    B, T1, _ = p.shape
    u_accept = torch.rand((B, T1 - 1), generator=generator, device=p.device, dtype=p.dtype)
    u_sample = torch.rand((B,), generator=generator, device=p.device, dtype=p.dtype)
    return _verify_tree_uniforms(p, q, x, parents, u_accept, u_sample)


# --------------------------------------------------------------------------- deterministic paths

def _longest_accepted_path(ok: torch.Tensor, parents: list[int]):
    """ok (B, T) bool: node i passes its own test. A node is on an accepted path if it and all its
    ancestors pass. Returns (end (B,) int64 node index or -1 for the root, path (B, D), depth
    of end (B,)). The deepest accepted node wins; ties go to the lowest node index."""
    B, T = ok.shape
    depth, D, anc = _tree_tables(parents)
    dev = ok.device
    if T == 0:
        z = torch.zeros(B, dtype=torch.int64, device=dev)
        return z - 1, torch.full((B, 0), -1, dtype=torch.int64, device=dev), z
    anc_t = torch.tensor(anc, dtype=torch.int64, device=dev).reshape(T + 1, D)
    # node i is on an accepted path if every node on root -> i passes (padding -1 reads the True column)
    ok_pad = torch.cat([ok, torch.ones((B, 1), dtype=torch.bool, device=dev)], 1)  # (B, T+1)
    on_path = ok_pad[:, anc_t[1:]].all(dim=-1)                                       # (B, T)
    depth_t = torch.tensor(depth, dtype=torch.int64, device=dev)
    score = torch.where(on_path, depth_t, 0)
    best_depth = score.max(dim=-1).values
    best = torch.argmax(score, dim=-1)          # argmax returns the first maximal index
    end = torch.where(best_depth > 0, best, -1)
    path = anc_t[end + 1]
    return end, path, best_depth


def _emit_path(tree_tokens, end, path, n_acc, last_token):
    B, D = path.shape
    safe = path.clamp(min=0)
    toks = torch.where(path >= 0, tree_tokens.gather(1, safe), -1) if D > 0 else path
    tokens = torch.cat([toks, torch.full((B, 1), -1, dtype=torch.int64, device=path.device)], 1)
    tokens.scatter_(1, n_acc.unsqueeze(-1), last_token.unsqueeze(-1))
    return tokens


def verify_tree_greedy(target_logits_or_probs, tree_tokens, parents):
    """Greedy (temperature 0) tree verification.

    target_logits_or_probs (B, T+1, V) laid out as in ``verify_tree``; tree_tokens (B, T);
    parents as in ``verify_tree``. Node i matches if its token is the argmax of its parent's row;
    the accepted path is the longest root path of matching nodes (deepest node; ties: lowest node
    index, i.e. the first found in node order), then the bonus token is the argmax at its end.
    Argmax ties go to the lowest token id. Returns (tokens (B, D+1), num_tokens (B,), path (B, D)).
    """
    t = target_logits_or_probs
    if t.dim() != 3:
        raise ValueError("target_logits_or_probs must be (B, T+1, V)")
    B, T1, _ = t.shape
    parents = _check_parents(parents, T1 - 1)
    x = tree_tokens.to(device=t.device, dtype=torch.int64)
    if tuple(x.shape) != (B, T1 - 1):
        raise ValueError(f"tree_tokens must be (B, T)=({B}, {T1 - 1})")
    a = torch.argmax(t, dim=-1)                                              # (B, T+1)
    par_rows = torch.tensor([q + 1 for q in parents], dtype=torch.int64, device=t.device)
    ok = x == a[:, par_rows] if T1 > 1 else torch.zeros((B, 0), dtype=torch.bool, device=t.device)
    end, path, n_acc = _longest_accepted_path(ok, parents)
    bonus = a.gather(1, (end + 1).unsqueeze(-1)).squeeze(-1)
    return _emit_path(x, end, path, n_acc, bonus), n_acc + 1, path


def verify_chain_greedy(target_logits_or_probs, draft_tokens):
    """Greedy (temperature 0) chain verification: accept the longest prefix of drafts that equal
    the target's argmax, then emit the argmax at the first mismatch (or the bonus position).

    target_logits_or_probs (B, K+1, V), draft_tokens (B, K). Returns (tokens (B, K+1) padded -1,
    num_tokens (B,) in [1, K+1]). Vectorised (no loops).
    """
    t = target_logits_or_probs
    if t.dim() != 3:
        raise ValueError("target_logits_or_probs must be (B, K+1, V)")
    B, K1, _ = t.shape
    K = K1 - 1
    x = draft_tokens.to(device=t.device, dtype=torch.int64)
    if tuple(x.shape) != (B, K):
        raise ValueError(f"draft_tokens must be (B, K)=({B}, {K})")
    a = torch.argmax(t, dim=-1)                                              # (B, K+1)
    n_acc = (x == a[:, :K]).to(torch.int64).cumprod(dim=-1).sum(dim=-1)
    bonus = a.gather(1, n_acc.unsqueeze(-1)).squeeze(-1)
    pos = torch.arange(K1, device=t.device)
    x_pad = torch.cat([x, torch.full((B, 1), -1, dtype=torch.int64, device=t.device)], dim=1)
    tokens = torch.where(pos < n_acc.unsqueeze(-1), x_pad, -1)
    tokens = torch.where(pos == n_acc.unsqueeze(-1), bonus.unsqueeze(-1), tokens)
    return tokens, n_acc + 1


# --------------------------------------------------------------------------- typical (LOSSY)

def typical_threshold(probs: torch.Tensor, posterior_threshold: float, posterior_alpha: float):
    """Medusa's typical-acceptance threshold per row: min(epsilon, delta * exp(-H(p))), with the
    exact entropy H(p) = -sum p log p (0 log 0 = 0). probs (..., V) -> (...)."""
    H = -torch.special.xlogy(probs, probs).sum(dim=-1)
    return torch.clamp(posterior_alpha * torch.exp(-H), max=posterior_threshold)


def _verify_tree_typical_uniforms(target_probs, tree_tokens, parents, posterior_threshold,
                                  posterior_alpha, bonus, u_sample):
    p = target_probs
    B, T1, _ = p.shape
    thr = typical_threshold(p, posterior_threshold, posterior_alpha)         # (B, T+1)
    if T1 > 1:
        par_rows = torch.tensor([a + 1 for a in parents], dtype=torch.int64, device=p.device)
        rows = torch.arange(B, device=p.device).unsqueeze(-1)
        px = p[rows, par_rows.unsqueeze(0), tree_tokens]                        # (B, T)
        ok = px > thr[:, par_rows]
    else:
        ok = torch.zeros((B, 0), dtype=torch.bool, device=p.device)
    end, path, n_acc = _longest_accepted_path(ok, parents)
    rows = torch.arange(B, device=p.device)
    p_end = p[rows, end + 1]
    if bonus == "greedy":
        last = torch.argmax(p_end, dim=-1)
    else:
        last = _sample_inverse_cdf(p_end, u_sample, inplace=True)
    return _emit_path(tree_tokens, end, path, n_acc, last), n_acc + 1, path


def verify_tree_typical_lossy(target_probs, tree_tokens, parents, posterior_threshold=0.09,
                              posterior_alpha=0.3, bonus="sample", generator=None):
    """Medusa's typical acceptance over a token tree. LOSSY: the output is NOT distributed as the
    target's (tests/test_verify_exact.py exhibits a departure); use it only where the speed/quality
    trade-off is wanted.

    Node i with token x is accepted if p(x) > min(posterior_threshold, posterior_alpha *
    exp(-H(p))), where p is the target row of i's parent and H its entropy (exact; Medusa's code
    adds 1e-5 inside the log). The longest root path of accepted nodes is taken (deepest node;
    ties: the lowest node index, i.e. the first found), then a last token from the target row at
    its end: sampled (``bonus="sample"``, uses ``generator``) or its argmax (``bonus="greedy"``).
    Draft probabilities are not used. Shapes as in ``verify_tree``; returns
    (tokens (B, D+1), num_tokens (B,), path (B, D)).
    """
    if bonus not in ("sample", "greedy"):
        raise ValueError("bonus must be 'sample' or 'greedy'")
    p, _, x, parents = _check_tree_args(target_probs, None, tree_tokens, parents)
    u_sample = torch.rand((p.shape[0],), generator=generator, device=p.device, dtype=p.dtype)
    return _verify_tree_typical_uniforms(p, x, parents, posterior_threshold, posterior_alpha,
                                         bonus, u_sample)


def verify_chain_typical_lossy(target_probs, draft_tokens, posterior_threshold=0.09,
                               posterior_alpha=0.3, bonus="sample", generator=None):
    """Medusa's typical acceptance on a chain. LOSSY (see ``verify_tree_typical_lossy``): accept
    the longest prefix of drafts with p_j(x_j) > min(epsilon, delta * exp(-H(p_j))), then a last
    token from p at the stop position (sampled, or argmax with ``bonus="greedy"``).

    target_probs (B, K+1, V), draft_tokens (B, K). Returns (tokens (B, K+1), num_tokens (B,)).
    """
    K = target_probs.shape[1] - 1
    tokens, num, _ = verify_tree_typical_lossy(target_probs, draft_tokens, chain_parents(K),
                                               posterior_threshold, posterior_alpha, bonus,
                                               generator)
    return tokens, num
