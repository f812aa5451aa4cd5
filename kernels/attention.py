"""Paged attention for a flat batch of query tokens over a slot-addressed KV cache.

One call serves every kind of query token the engine batches together: prefill chunks (with
prior context), single decode tokens, chain-verify tokens and tree-verify tokens (SpecInfer-style
tree attention, Miao et al. 2023). The kernel is flash-decoding style (Dao et al. 2022; the paged
layout of vLLM, Kwon et al. 2023): one program per (query token, kv head), looping over the
key blocks of its sequence with an online softmax in fp32; a program covers the query heads of
one GQA group at once.

Visibility: query i of sequence b = q_seq[i] sees key position k iff
    k <= q_pos[i]  and  (k < tree_start[b]  or  bit (k - tree_start[b]) of q_anc[i] is set)
(bits 0..62; a relative position >= 63 is never visible through the mask). ``NO_TREE`` as
tree_start gives plain causal attention.

``paged_attention`` checks its arguments and dispatches; ``paged_attention_ref`` is the torch
reference (the CPU default), ``paged_attention_triton`` the Triton launcher.
"""
from __future__ import annotations

import math
from typing import Sequence

import torch

from kernels.backend import BACKENDS, TritonKernel

__all__ = [
    "NO_TREE",
    "ancestor_masks",
    "paged_attention",
    "paged_attention_ref",
    "paged_attention_triton",
]

tl = None  # bound to triton.language on the first Triton launch (kernels.backend.TritonKernel)

NO_TREE = 2 ** 30           # tree_start for a sequence without a tree: plain causal attention
MAX_TREE_NODES = 63         # bits 0..62 of the int64 ancestor mask
_INDEX_DTYPES = (torch.int32, torch.int64)


def ancestor_masks(parents: Sequence[int]) -> list[int]:
    """Ancestor-or-self bitmasks of a tree given as parent indices (-1: hangs off the root token,
    which lies in the context just before the tree). ``parents[i] < i``; at most 63 nodes."""
    if len(parents) > MAX_TREE_NODES:
        raise ValueError(f"a tree has at most {MAX_TREE_NODES} nodes, got {len(parents)}")
    masks: list[int] = []
    for i, p in enumerate(parents):
        if not -1 <= p < i:
            raise ValueError(f"parents[{i}] = {p}: expected -1 <= parent < {i}")
        masks.append((1 << i) | (masks[p] if p >= 0 else 0))
    return masks


# --------------------------------------------------------------------------- torch reference

def paged_attention_ref(q, k_cache, v_cache, kv_slots, kv_lens, q_seq, q_pos, tree_start, q_anc,
                        scale: float, *, max_elems: int = 1 << 22, bulk: int = 2, group_max: int = 64) -> torch.Tensor:
    """Mask and softmax in fp32 over each query's keys, gathered via kv_slots. Sequences with
    `bulk` to `group_max` queries in the step (chains and trees), when there are several, share
    padded fused-attention calls, a few sequences per call; any other sequence with `bulk` or more
    (a prefill chunk, a lone tree) gathers its keys once for all its queries; the other queries
    (decode) gather their own, in chunks whose gathered K/V and scores hold about ``max_elems``
    floats, each chunk only up to its largest visible position. A group call's sequences are
    counted at its most query rows, padded. The bound, 2^22 floats (16 MiB; 2^25 before 0.48.0),
    keeps each chunk's buffers small enough for the host allocator to reuse: at 2^25 a Llama-like
    decode of 16 sequences after 2,048 keys ran 3-4x slower in the processes where its 64 MiB
    gathers were mapped afresh and page-faulted on every call (bench/bench_attention_chunks.py).
    The step-time grid at 2^22 read 3.9% / 11.2% (median / p90), 0.47.0's three at 2^25 3.1-4.4% /
    9.3-12.2% (validation/results/cpu-epyc-zen3/0.48.0/steptime-chunks.txt)."""
    N, H, D = q.shape
    out = torch.empty((N, H, D), dtype=q.dtype, device=q.device)
    if N == 0:
        return out
    qs = q_seq.long()
    counts = torch.bincount(qs)
    many = (counts >= bulk).nonzero().flatten().tolist()
    group = [b for b in many if counts[b] <= group_max]
    if len(group) == 1:  # one sequence: its own call, without the padding bookkeeping
        group = []
    n_kv = k_cache.shape[1]
    L_all = kv_slots.shape[1]
    q_most = int(counts[group].max()) if group else 0  # the padded query rows of a group call
    per_seq = L_all * (2 * n_kv * D + H * q_most)  # gathered K/V and scores, at most
    step = max(1, max_elems // max(1, per_seq))
    for s in range(0, len(group), step):
        idx, o = _attend_group(q, k_cache, v_cache, kv_slots, kv_lens, qs, q_pos, tree_start, q_anc, scale,
                               group[s:s + step])
        out[idx] = o
    grouped = set(group)
    for b in many:
        if b not in grouped:
            idx = (qs == b).nonzero().flatten()
            out[idx] = _attend(q, k_cache, v_cache, kv_slots, kv_lens, qs, q_pos, tree_start, q_anc, scale, idx, b)
    rest = (counts[qs] < bulk).nonzero().flatten() if many else torch.arange(N, device=q.device)
    per_query = L_all * (2 * n_kv * D + H)
    chunk = max(1, max_elems // max(1, per_query))
    for s in range(0, len(rest), chunk):
        idx = rest[s:s + chunk]
        out[idx] = _attend(q, k_cache, v_cache, kv_slots, kv_lens, qs, q_pos, tree_start, q_anc, scale, idx, None)
    return out


def _visible(pos, qp, lens, ts, anc):
    """(n, L) bool: query i sees key position pos[0, j] (module docstring's rule). Built as the
    context before each query's tree (one compare) plus its ancestors' bits scattered into the
    at most 63 tree positions, so a tree costs (n, 63) bit tests, not (n, L)."""
    end = torch.minimum(qp + 1, lens)                                        # (n,) exclusive, <= L
    vis = pos < torch.minimum(end, ts)[:, None]                              # (n, L)
    rows = (ts < end).nonzero().flatten()                                    # (r,) queries in a tree
    if len(rows):
        j = torch.arange(MAX_TREE_NODES, device=pos.device)                  # (63,)
        cols = ts[rows, None] + j                                            # (r, 63)
        on = ((anc[rows, None] >> j) & 1).bool() & (cols < end[rows, None])   # so cols < L
        vis[rows[:, None].expand_as(cols)[on], cols[on]] = True
    return vis


def _gather_kv(k_cache, v_cache, slots, pos, lens):
    """K and V of `slots` (..., L) as fp32 (..., L, n_kv, D). Positions at or past a sequence's
    length `lens` (...,) read its first slot instead (written, so finite: unwritten slots may hold
    NaN); callers mask them out."""
    S, n_kv, D = k_cache.shape
    rows = torch.where(pos < lens[..., None], slots, slots[..., :1]).reshape(-1)
    k = k_cache.reshape(S, n_kv * D).index_select(0, rows).float()
    v = v_cache.reshape(S, n_kv * D).index_select(0, rows).float()
    return k.view(*slots.shape, n_kv, D), v.view(*slots.shape, n_kv, D)


def _attend_group(q, k_cache, v_cache, kv_slots, kv_lens, qs, q_pos, tree_start, q_anc, scale, seqs):
    """One fused-attention call for all queries of the sequences `seqs`: keys gathered per
    sequence up to the group's largest visible position, queries padded to the largest count
    (a padded row sees key 0 only and is dropped). Returns (query indices (n,), (n, H, D))."""
    dev = q.device
    _, H, D = q.shape
    n_kv = k_cache.shape[1]
    S = len(seqs)
    sb = torch.tensor(seqs, device=dev)                                        # (S,)
    row_of = torch.full((kv_slots.shape[0],), -1, dtype=torch.long, device=dev)
    row_of[sb] = torch.arange(S, device=dev)
    g_all = row_of[qs]                                                         # (N,) group row, -1 if none
    idx = (g_all >= 0).nonzero().flatten()                                     # (n,)
    g = g_all[idx]                                                             # (n,)
    cnt = torch.bincount(g, minlength=S)                                       # (S,)
    order = torch.argsort(g, stable=True)
    rank = torch.empty_like(g)
    rank[order] = torch.arange(len(g), device=dev) - (torch.cumsum(cnt, 0) - cnt)[g[order]]  # (n,)
    qp = q_pos.long()[idx]
    L = min(int(qp.max()) + 1, kv_slots.shape[1])
    pos = torch.arange(L, device=dev)[None, :]                                 # (1, L)
    lens = kv_lens.long()[sb]                                                  # (S,)
    vis = _visible(pos, qp, lens[g], tree_start.long()[sb][g], q_anc.long()[idx])  # (n, L)
    k, v = _gather_kv(k_cache, v_cache, kv_slots[sb, :L].long(), pos, lens)   # (S, L, n_kv, D)
    k, v = k.transpose(1, 2), v.transpose(1, 2)                                # (S, n_kv, L, D)
    Qm = int(cnt.max())
    mask = torch.zeros(S, Qm, L, dtype=torch.bool, device=dev)
    mask[:, :, 0] = True
    mask[g, rank] = vis                                                        # (S, Qm, L)
    qpad = torch.zeros(S, Qm, H, D, dtype=torch.float32, device=dev)
    qpad[g, rank] = q[idx].float()
    o = torch.nn.functional.scaled_dot_product_attention(
        qpad.transpose(1, 2), k, v, attn_mask=mask[:, None], scale=scale, enable_gqa=H > n_kv)  # (S, H, Qm, D)
    return idx, o.transpose(1, 2)[g, rank].to(q.dtype)


def _attend(q, k_cache, v_cache, kv_slots, kv_lens, qs, q_pos, tree_start, q_anc, scale, idx, seq):
    """Attention of the queries `idx`: over one shared gather of sequence `seq`'s keys, or (seq
    None) each query over its own sequence's keys. Returns (n, H, D) in q's dtype."""
    n, (_, H, D) = len(idx), q.shape
    n_kv = k_cache.shape[1]
    G = H // n_kv
    qp = q_pos.long()[idx]
    sq = qs[idx]
    ts, lens, anc = tree_start.long()[sq], kv_lens.long()[sq], q_anc.long()[idx]
    L = min(int(qp.max()) + 1, kv_slots.shape[1])
    pos = torch.arange(L, device=q.device)[None, :]                          # (1, L)
    vis = _visible(pos, qp, lens, ts, anc)                                   # (n, L)
    qf = q[idx].float().view(n, n_kv, G, D)
    # per KV head the gathered keys are a strided matrix BLAS reads as is (no transposed copies)
    if seq is None:
        k, v = _gather_kv(k_cache, v_cache, kv_slots[sq, :L].long(), pos, lens)  # (n, L, n_kv, D)
        scores = torch.stack([torch.bmm(qf[:, h], k[:, :, h].transpose(1, 2)) for h in range(n_kv)], 1)
    else:  # one gather for all the sequence's queries, then torch's fused attention
        k, v = _gather_kv(k_cache, v_cache, kv_slots[seq, :L].long(), pos[0], kv_lens[seq].long())
        k, v = k.transpose(0, 1), v.transpose(0, 1)                         # (n_kv, L, D)
        o = torch.nn.functional.scaled_dot_product_attention(
            q[idx].float().transpose(0, 1)[None], k[None], v[None], attn_mask=vis, scale=scale,
            enable_gqa=G > 1)                                               # (1, H, n, D)
        return o[0].transpose(0, 1).to(q.dtype)
    scores.mul_(scale).masked_fill_(~vis[:, None, None, :], float("-inf"))  # (n, n_kv, G, L)
    p = torch.softmax(scores, dim=-1)
    o = torch.stack([torch.bmm(p[:, h], v[:, :, h]) for h in range(n_kv)], 1)  # (n, n_kv, G, D)
    return o.reshape(n, H, D).to(q.dtype)


# --------------------------------------------------------------------------- Triton kernel

def _paged_attention_kernel(
    q_ptr, k_ptr, v_ptr, out_ptr, slots_ptr, lens_ptr, qseq_ptr, qpos_ptr, tstart_ptr, anc_ptr,
    scale_log2,
    stride_qn, stride_qh, stride_kn, stride_kh, stride_vn, stride_vh, stride_on, stride_oh,
    stride_sb, stride_sl,
    G, D,
    G_PAD: tl.constexpr, D_PAD: tl.constexpr, BLOCK_N: tl.constexpr, UPCAST: tl.constexpr,
):
    i = tl.program_id(0).to(tl.int64)            # query token
    kvh = tl.program_id(1).to(tl.int64)          # kv head; query heads kvh*G .. kvh*G+G-1
    b = tl.load(qseq_ptr + i).to(tl.int64)
    qpos = tl.load(qpos_ptr + i).to(tl.int64)
    kv_len = tl.load(lens_ptr + b).to(tl.int64)
    ts = tl.load(tstart_ptr + b).to(tl.int64)
    anc = tl.load(anc_ptr + i).to(tl.int64)
    end = tl.minimum(qpos + 1, kv_len)

    offs_g = tl.arange(0, G_PAD)
    offs_d = tl.arange(0, D_PAD)
    offs_n = tl.arange(0, BLOCK_N)
    g_mask = offs_g < G
    d_mask = offs_d < D
    heads = kvh * G + offs_g
    q = tl.load(q_ptr + i * stride_qn + heads[:, None] * stride_qh + offs_d[None, :],
                mask=g_mask[:, None] & d_mask[None, :], other=0.0)          # (G_PAD, D_PAD)
    if UPCAST:
        q = q.to(tl.float32)

    m_i = tl.full((G_PAD,), -1.0e30, tl.float32)  # finite: a fully masked block gives p = 0
    l_i = tl.full((G_PAD,), 0.0, tl.float32)
    acc = tl.full((G_PAD, D_PAD), 0.0, tl.float32)
    for start in range(0, end, BLOCK_N):
        pos = start + offs_n                                                 # (BLOCK_N,)
        rel = pos - ts
        shift = tl.minimum(tl.maximum(rel, 0), 63)
        in_anc = ((anc >> shift) & 1) != 0
        visible = (pos < end) & ((rel < 0) | (in_anc & (rel < 63)))
        slot = tl.load(slots_ptr + b * stride_sb + pos * stride_sl, mask=visible, other=0).to(tl.int64)
        kv_mask = visible[:, None] & d_mask[None, :]
        k = tl.load(k_ptr + slot[:, None] * stride_kn + kvh * stride_kh + offs_d[None, :],
                    mask=kv_mask, other=0.0)                                # (BLOCK_N, D_PAD)
        v = tl.load(v_ptr + slot[:, None] * stride_vn + kvh * stride_vh + offs_d[None, :],
                    mask=kv_mask, other=0.0)
        if UPCAST:
            s = tl.dot(q, tl.trans(k.to(tl.float32)), input_precision="ieee")
        else:
            s = tl.dot(q, tl.trans(k))                                       # fp32 accumulate
        s = tl.where(visible[None, :], s * scale_log2, float("-inf"))        # (G_PAD, BLOCK_N)
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        if UPCAST:
            pv = tl.dot(p, v.to(tl.float32), input_precision="ieee")
        else:
            pv = tl.dot(p.to(v.dtype), v)
        acc = acc * alpha[:, None] + pv
        m_i = m_new

    o = acc / l_i[:, None]
    tl.store(out_ptr + i * stride_on + heads[:, None] * stride_oh + offs_d[None, :],
             o.to(out_ptr.dtype.element_ty), mask=g_mask[:, None] & d_mask[None, :])


_kernel = TritonKernel(_paged_attention_kernel)


def _pow2(n: int, lo: int) -> int:
    return max(lo, 1 << max(0, n - 1).bit_length())


def paged_attention_triton(q, k_cache, v_cache, kv_slots, kv_lens, q_seq, q_pos, tree_start, q_anc,
                           scale: float, *, block_n: int | None = None,
                           num_warps: int = 4) -> torch.Tensor:
    """Launch the Triton kernel: grid (N, n_kv). On GPU, fp16/bf16 q and caches of the same dtype
    use native-dtype dots with fp32 accumulation (probabilities rounded to v's dtype for p·v);
    everything else (fp32, mixed dtypes, the CPU interpreter) casts to fp32 before the dots."""
    N, H, D = q.shape
    n_kv = k_cache.shape[1]
    G = H // n_kv
    out = torch.empty((N, H, D), dtype=q.dtype, device=q.device)
    if N == 0:
        return out
    kernel = _kernel(q.device)
    half = (torch.float16, torch.bfloat16)
    upcast = (q.device.type != "cuda" or q.dtype not in half
              or k_cache.dtype != q.dtype or v_cache.dtype != q.dtype)
    if block_n is None:
        block_n = 64 if q.device.type == "cuda" else 32
    if block_n < 16 or block_n & (block_n - 1):
        raise ValueError(f"block_n must be a power of two >= 16, got {block_n}")
    kernel[(N, n_kv)](
        q, k_cache, v_cache, out, kv_slots, kv_lens, q_seq, q_pos, tree_start, q_anc,
        float(scale) * math.log2(math.e),
        q.stride(0), q.stride(1), k_cache.stride(0), k_cache.stride(1),
        v_cache.stride(0), v_cache.stride(1), out.stride(0), out.stride(1),
        kv_slots.stride(0), kv_slots.stride(1),
        G, D,
        G_PAD=_pow2(G, 16), D_PAD=_pow2(D, 16), BLOCK_N=block_n, UPCAST=upcast,
        num_warps=num_warps,
    )
    return out


# --------------------------------------------------------------------------- checking wrapper

def _need(cond: bool, msg: str) -> None:
    if not cond:
        raise ValueError(f"paged_attention: {msg}")


def _check_index(name: str, t, ndim: int, dtypes=_INDEX_DTYPES) -> None:
    _need(isinstance(t, torch.Tensor), f"{name} must be a torch.Tensor, got {type(t).__name__}")
    _need(t.ndim == ndim, f"{name} must be {ndim}-D, got shape {tuple(t.shape)}")
    _need(t.dtype in dtypes, f"{name} must have dtype in {[str(d) for d in dtypes]}, got {t.dtype}")


def check_paged_attention_args(q, k_cache, v_cache, kv_slots, kv_lens, q_seq, q_pos, tree_start,
                               q_anc, scale, check_values: bool | None = None) -> None:
    """Raise ValueError unless the arguments satisfy the contract (module docstring). Shapes,
    dtypes, devices and strides are always checked; values (index ranges, slots in range, every
    query seeing itself) by default only on CPU, where it costs no device sync."""
    for name, t in (("q", q), ("k_cache", k_cache), ("v_cache", v_cache)):
        _need(isinstance(t, torch.Tensor), f"{name} must be a torch.Tensor, got {type(t).__name__}")
        _need(t.ndim == 3, f"{name} must be 3-D, got shape {tuple(t.shape)}")
        _need(t.dtype.is_floating_point, f"{name} must be floating point, got {t.dtype}")
        _need(t.stride(-1) == 1, f"{name} must be contiguous in its last dim, got strides {t.stride()}")
    N, H, D = q.shape
    S, n_kv, Dk = k_cache.shape
    _need(tuple(v_cache.shape) == tuple(k_cache.shape),
          f"v_cache shape {tuple(v_cache.shape)} != k_cache shape {tuple(k_cache.shape)}")
    _need(Dk == D, f"head_dim of q ({D}) != head_dim of k_cache ({Dk}); q must be (N, n_heads, head_dim)")
    _need(n_kv > 0 and H > 0 and H % n_kv == 0,
          f"n_heads ({H}) must be a positive multiple of n_kv_heads ({n_kv})")
    _check_index("kv_slots", kv_slots, 2)
    B, L_max = kv_slots.shape
    _check_index("kv_lens", kv_lens, 1)
    _check_index("tree_start", tree_start, 1)
    _check_index("q_seq", q_seq, 1)
    _check_index("q_pos", q_pos, 1)
    _check_index("q_anc", q_anc, 1, (torch.int64,))
    _need(kv_lens.shape[0] == B, f"kv_lens must be (B,) = ({B},), got {tuple(kv_lens.shape)}")
    _need(tree_start.shape[0] == B, f"tree_start must be (B,) = ({B},), got {tuple(tree_start.shape)}")
    for name, t in (("q_seq", q_seq), ("q_pos", q_pos), ("q_anc", q_anc)):
        _need(t.shape[0] == N, f"{name} must be (N,) = ({N},), got {tuple(t.shape)}")
    devs = {t.device for t in (q, k_cache, v_cache, kv_slots, kv_lens, q_seq, q_pos, tree_start, q_anc)}
    _need(len(devs) == 1, f"all tensors must be on one device, got {sorted(map(str, devs))}")
    _need(isinstance(scale, (int, float)) and math.isfinite(scale), f"scale must be a finite float, got {scale!r}")

    if check_values is None:
        check_values = q.device.type == "cpu"
    if not check_values or N == 0:
        return
    lens = kv_lens.long()
    _need(bool(((lens >= 0) & (lens <= L_max)).all()), f"kv_lens must lie in [0, L_max={L_max}]")
    _need(bool(((q_seq >= 0) & (q_seq < B)).all()), f"q_seq must lie in [0, B={B})")
    qs, qp = q_seq.long(), q_pos.long()
    _need(bool(((qp >= 0) & (qp < lens[qs])).all()), "q_pos must lie in [0, kv_lens[q_seq])")
    valid = torch.arange(L_max, device=q.device)[None, :] < lens[:, None]
    used = kv_slots[valid]
    _need(bool(((used >= 0) & (used < S)).all()),
          f"kv_slots within kv_lens must lie in [0, num_slots={S})")
    rel = qp - tree_start.long()[qs]
    sees_self = (rel < 0) | ((rel < MAX_TREE_NODES) & (((q_anc >> rel.clamp(0, 63)) & 1) == 1))
    _need(bool(sees_self.all()), "every query must see itself: q_anc must set the bit of its own tree node")


def paged_attention(q, k_cache, v_cache, kv_slots, kv_lens, q_seq, q_pos, tree_start, q_anc,
                    scale: float | None = None, *, backend: str = "torch",
                    check_values: bool | None = None) -> torch.Tensor:
    """softmax(scale · q·kᵀ over visible keys) · v in fp32, returned as (N, n_heads, head_dim) in
    q's dtype. ``scale`` defaults to head_dim ** -0.5. See the module docstring for the layout."""
    if scale is None and isinstance(q, torch.Tensor) and q.ndim == 3:
        scale = q.shape[-1] ** -0.5
    check_paged_attention_args(q, k_cache, v_cache, kv_slots, kv_lens, q_seq, q_pos, tree_start,
                               q_anc, scale, check_values)
    args = (q, k_cache, v_cache, kv_slots, kv_lens, q_seq, q_pos, tree_start, q_anc, float(scale))
    if backend == "torch":
        return paged_attention_ref(*args)
    if backend == "triton":
        return paged_attention_triton(*args)
    raise ValueError(f"unknown kernel backend {backend!r}: expected one of {BACKENDS}")
