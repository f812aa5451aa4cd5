"""Tests of kernels/: paged attention, KV store, RMSNorm.

* The torch references against naive dense computations (per-sequence dense K/V, explicit
  causal / tree masks from parent pointers, a Python loop over queries, float64).
* The Triton kernels against the torch references: on CPU under the Triton interpreter, on small
  shapes; on a CUDA machine, on the GPU.
* The GPU path of the Triton kernels compiles for sm_90 (no GPU needed; marked slow).
* The wrappers' argument checks.

Tolerances (max abs and rel difference, ``torch.testing.assert_close``):
  reference vs naive float64:  fp32 1e-5, fp16 4e-3 (the output's own rounding)
  Triton vs reference:         fp32 1e-4, fp16 1e-2, bf16 3e-2
  rms_norm Triton vs reference: fp32 1e-5, fp16 2e-3, bf16 1.6e-2 (one rounding apart at most)

The Triton interpreter is fixed when triton is first imported (kernels/backend.py), so this
module asks for it before anything imports triton. If triton was already imported in compiled
mode by the time this module loads (another test module imported it first), the in-process
Triton tests skip, saying so, and ``test_triton_in_subprocess`` runs them in a fresh interpreter
process instead.
"""
from __future__ import annotations

import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import math  # noqa: E402
import random  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

import kernels.backend as backend_mod  # noqa: E402
from kernels import NO_TREE, ancestor_masks, default_backend, get_ops  # noqa: E402
from kernels.attention import paged_attention_ref, paged_attention_triton  # noqa: E402
from kernels.rmsnorm import rms_norm_triton  # noqa: E402

TDEV = torch.device("cuda" if torch.cuda.is_available() else "cpu")
IN_SUBPROCESS = os.environ.get("SPECSIM_KERNELS_SUBPROCESS") == "1"
if not backend_mod.triton_available():
    TRITON_SKIP = "triton is not installed"
elif TDEV.type == "cpu" and not backend_mod.interpreter_active():
    TRITON_SKIP = ("triton was imported without TRITON_INTERPRET=1 before this module loaded; "
                   "test_triton_in_subprocess runs these tests in a fresh process instead")
else:
    TRITON_SKIP = None
needs_triton = pytest.mark.skipif(TRITON_SKIP is not None, reason=TRITON_SKIP or "")

TORCH = get_ops("torch")

REF_TOL = {torch.float32: 1e-5, torch.float16: 4e-3}
TRITON_TOL = {torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 3e-2}
NORM_TOL = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}


def close(actual, expected, tol):
    torch.testing.assert_close(actual.double(), expected.double(), atol=tol, rtol=tol)


# --------------------------------------------------------------------------- case builder

@dataclass
class Case:
    args: tuple                      # the paged_attention arguments, scale last
    visible: list = field(default_factory=list)   # per query: the set of visible key positions
    seq_keys: list = field(default_factory=list)  # per sequence: the slots of positions 0..L-1

    def to(self, device):
        return Case(tuple(a.to(device) if isinstance(a, torch.Tensor) else a for a in self.args),
                    self.visible, self.seq_keys)


def tree_ancestors(parents, j):
    """Ancestors-or-self of node j, by walking parent pointers."""
    out = set()
    while j >= 0:
        out.add(j)
        j = parents[j]
    return out


def random_parents(rng, n):
    return [rng.randint(-1, i - 1) for i in range(n)]


def make_case(seqs, *, n_heads, n_kv, d, dtype, seed, page_size=4, paged=True, q_view=False):
    """A flat batch over sequences described as ("prefill", ctx, chunk) | ("decode", ctx) |
    ("chain", ctx, k) | ("tree", ctx, parents). Queries are shuffled across sequences; pages
    (or, with paged=False, single slots) are scattered in the pool; every cache slot no sequence
    uses holds NaN, and kv_slots padding holds garbage."""
    rng = random.Random(seed)
    gen = torch.Generator().manual_seed(seed)
    lens, starts, queries = [], [], []        # queries: (seq, pos, ancestor set)
    for b, s in enumerate(seqs):
        kind, ctx = s[0], s[1]
        if kind == "prefill":
            L, ts = ctx + s[2], NO_TREE
            queries += [(b, p, set()) for p in range(ctx, L)]
        elif kind == "decode":
            L, ts = ctx + 1, NO_TREE
            queries.append((b, ctx, set()))
        elif kind == "chain":                 # the root token plus k drafts, causal
            L, ts = ctx + 1 + s[2], NO_TREE
            queries += [(b, p, set()) for p in range(ctx, L)]
        elif kind == "tree":                  # the root token at ctx, tree nodes from ctx + 1
            parents = s[2]
            L, ts = ctx + 1 + len(parents), ctx + 1
            queries.append((b, ctx, set()))
            queries += [(b, ts + j, tree_ancestors(parents, j)) for j in range(len(parents))]
        else:
            raise AssertionError(kind)
        lens.append(L)
        starts.append(ts)
    B, L_max = len(seqs), max(lens) + rng.randint(0, 3)
    n_pages = sum(-(-L // page_size) for L in lens) + 3
    S = n_pages * page_size
    pages = list(range(1, n_pages))          # page 0 (slot 0 too) stays unused: NaN
    rng.shuffle(pages)
    free_slots = list(range(1, S))
    rng.shuffle(free_slots)
    seq_keys = []
    for L in lens:
        if paged:
            own = [pages.pop() for _ in range(-(-L // page_size))]
            seq_keys.append([own[p // page_size] * page_size + p % page_size for p in range(L)])
        else:
            seq_keys.append([free_slots.pop() for _ in range(L)])
    kv_slots = torch.randint(-7, 10 ** 6, (B, L_max), generator=gen).to(torch.int32)
    for b, keys in enumerate(seq_keys):
        kv_slots[b, :len(keys)] = torch.tensor(keys, dtype=torch.int32)
    k_cache = torch.full((S, n_kv, d), float("nan"), dtype=dtype)
    v_cache = torch.full((S, n_kv, d), float("nan"), dtype=dtype)
    used = torch.tensor([x for keys in seq_keys for x in keys], dtype=torch.int64)
    TORCH.store_kv(k_cache, v_cache, torch.randn(len(used), n_kv, d, generator=gen).to(dtype),
                   torch.randn(len(used), n_kv, d, generator=gen).to(dtype), used)
    rng.shuffle(queries)
    N = len(queries)
    if q_view:      # q as a strided view of a fused qkv projection, as the engine would pass it
        qkv = torch.randn(N, n_heads + 2 * n_kv, d, generator=gen).to(dtype)
        q = qkv[:, :n_heads]
    else:
        q = torch.randn(N, n_heads, d, generator=gen).to(dtype)
    q_seq = torch.tensor([b for b, _, _ in queries], dtype=torch.int32)
    q_pos = torch.tensor([p for _, p, _ in queries], dtype=torch.int32)
    q_anc = torch.tensor([sum(1 << a for a in anc) for _, _, anc in queries], dtype=torch.int64)
    visible = []
    for b, p, anc in queries:
        ts = starts[b]
        visible.append({k for k in range(p + 1) if k < ts or (k - ts) in anc})
    args = (q, k_cache, v_cache, kv_slots, torch.tensor(lens, dtype=torch.int32), q_seq, q_pos,
            torch.tensor(starts, dtype=torch.int32), q_anc, 1.0 / math.sqrt(d))
    return Case(args, visible, seq_keys)


def naive_attention(case: Case) -> torch.Tensor:
    """Dense per-sequence K/V, an explicit visibility list per query, a loop over queries."""
    q, k_cache, v_cache, _, _, q_seq, _, _, _, scale = case.args
    N, H, _ = q.shape
    G = H // k_cache.shape[1]
    dense = [(k_cache[torch.tensor(keys)].double(), v_cache[torch.tensor(keys)].double())
             for keys in case.seq_keys]
    out = torch.empty(q.shape, dtype=torch.float64)
    for i in range(N):
        K, V = dense[int(q_seq[i])]
        vis = sorted(case.visible[i])
        for h in range(H):
            s = K[vis, h // G] @ q[i, h].double() * scale
            out[i, h] = torch.softmax(s, 0) @ V[vis, h // G]
    return out


MIXED = [("prefill", 5, 6), ("decode", 13), ("decode", 0), ("chain", 7, 3),
         ("tree", 9, [-1, 0, 0, 1, -1, 4, 2])]


def big_mixed(rng):
    return [("prefill", rng.randint(0, 20), rng.randint(1, 12)), ("decode", rng.randint(0, 30)),
            ("decode", rng.randint(0, 30)), ("chain", rng.randint(1, 20), rng.randint(1, 6)),
            ("tree", rng.randint(1, 20), random_parents(rng, rng.randint(1, 16))),
            ("tree", rng.randint(1, 5), random_parents(rng, 63))]


# --------------------------------------------------------------------------- reference vs naive

def test_ancestor_masks():
    rng = random.Random(3)
    for n in (1, 5, 63):
        parents = random_parents(rng, n)
        assert ancestor_masks(parents) == [sum(1 << a for a in tree_ancestors(parents, j))
                                           for j in range(n)]
    assert ancestor_masks([-1, 0, 1]) == [0b1, 0b11, 0b111]
    with pytest.raises(ValueError):
        ancestor_masks([0])
    with pytest.raises(ValueError):
        ancestor_masks([-1] * 64)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("heads", [(4, 2), (3, 3), (8, 1)], ids=["gqa", "mha", "mqa"])
def test_reference_vs_naive(seed, dtype, heads):
    rng = random.Random(seed)
    case = make_case(big_mixed(rng), n_heads=heads[0], n_kv=heads[1], d=8, dtype=dtype,
                     seed=seed, paged=seed != 2)
    out = TORCH.paged_attention(*case.args)
    assert out.dtype == dtype and out.shape == case.args[0].shape
    close(out, naive_attention(case), REF_TOL[dtype])


@pytest.mark.parametrize("opts", [{"max_elems": 20000},          # decode chunks; one sequence per group call
                                  {"group_max": 4},              # trees and prefill one sequence at a time
                                  {"bulk": 1000}],               # every query gathers its own keys
                         ids=["chunked", "per-sequence", "per-query"])
def test_reference_paths_match(opts):
    """The padded group path, the per-sequence path and the per-query path agree."""
    case = make_case(big_mixed(random.Random(7)), n_heads=4, n_kv=2, d=8, dtype=torch.float32, seed=7)
    full = paged_attention_ref(*case.args)
    other = paged_attention_ref(*case.args, **opts)
    torch.testing.assert_close(other, full, atol=1e-6, rtol=1e-6)


def test_group_calls_sized_by_their_query_rows(monkeypatch):
    """A group call holds as many sequences as their gathered K/V and scores allow at the
    group's most query rows (not at group_max's), and the outputs match one call for all."""
    import kernels.attention as A
    case = make_case([("chain", 20, 2)] * 8, n_heads=4, n_kv=2, d=8, dtype=torch.float32, seed=3)
    L_all = case.args[3].shape[1]
    per_seq = L_all * (2 * 2 * 8 + 4 * 3)  # K and V of 2 KV heads, scores of 4 heads x 3 rows
    calls = []
    real = A._attend_group
    monkeypatch.setattr(A, "_attend_group", lambda *a: calls.append(len(a[-1])) or real(*a))
    out = paged_attention_ref(*case.args, max_elems=4 * per_seq)
    assert calls == [4, 4]
    torch.testing.assert_close(out, paged_attention_ref(*case.args, max_elems=1 << 30), atol=1e-6, rtol=1e-6)


def test_tree_with_chain_parents_is_causal():
    """A tree whose nodes form one chain sees exactly what causal attention sees."""
    c = make_case([("tree", 6, [-1, 0, 1, 2])], n_heads=2, n_kv=1, d=8, dtype=torch.float32, seed=1)
    q, kc, vc, slots, lens, q_seq, q_pos, _, q_anc, scale = c.args
    causal = TORCH.paged_attention(q, kc, vc, slots, lens, q_seq, q_pos,
                                   torch.full_like(lens, NO_TREE), torch.zeros_like(q_anc), scale)
    torch.testing.assert_close(TORCH.paged_attention(*c.args), causal)


def test_empty_batch():
    c = make_case([("decode", 3)], n_heads=2, n_kv=1, d=8, dtype=torch.float32, seed=0)
    q, kc, vc, slots, lens, q_seq, q_pos, ts, q_anc, scale = c.args
    out = TORCH.paged_attention(q[:0], kc, vc, slots, lens, q_seq[:0], q_pos[:0], ts, q_anc[:0], scale)
    assert out.shape == (0, 2, 8)


def test_store_kv_reference_and_rms_norm_reference():
    gen = torch.Generator().manual_seed(0)
    kc, vc = torch.zeros(10, 2, 4), torch.zeros(10, 2, 4)
    k, v = torch.randn(3, 2, 4, generator=gen), torch.randn(3, 2, 4, generator=gen)
    TORCH.store_kv(kc, vc, k, v, torch.tensor([7, 0, 4], dtype=torch.int32))
    assert torch.equal(kc[[7, 0, 4]], k) and torch.equal(vc[[7, 0, 4]], v)
    assert kc[[1, 2, 3, 5, 6, 8, 9]].abs().sum() == 0
    x, w = torch.randn(5, 12, generator=gen), torch.randn(12, generator=gen)
    xd = x.double()
    naive = xd / torch.sqrt((xd * xd).mean(-1, keepdim=True) + 1e-5) * w.double()
    close(TORCH.rms_norm(x, w, 1e-5), naive, 1e-6)
    yh = TORCH.rms_norm(x.half(), w, 1e-5)
    assert yh.dtype == torch.float16
    close(yh, naive, 4e-3)


# --------------------------------------------------------------------------- Triton vs reference

def check_triton_attention(case, dtype, **kw):
    ref = paged_attention_ref(*case.args)
    c = case.to(TDEV)
    if kw:                           # launcher options (block_n): call the launcher directly
        out = paged_attention_triton(*c.args, **kw)
    else:
        out = get_ops("triton").paged_attention(*c.args)
    assert out.dtype == dtype and out.shape == ref.shape
    close(out.cpu(), ref, TRITON_TOL[dtype])


@needs_triton
@pytest.mark.parametrize("dtype,heads", [(torch.float32, (4, 2)), (torch.float16, (4, 1)),
                                         (torch.bfloat16, (2, 2))], ids=["fp32-gqa", "fp16-mqa", "bf16-mha"])
def test_triton_attention_mixed(dtype, heads):
    case = make_case(MIXED, n_heads=heads[0], n_kv=heads[1], d=16, dtype=dtype, seed=11)
    check_triton_attention(case, dtype)


@needs_triton
def test_triton_attention_multiblock_strided():
    """Several key blocks per query (block_n 16, up to 40 keys), head_dim 32 (not padded),
    scattered single slots, q a strided view of a fused qkv tensor."""
    seqs = [("prefill", 26, 3), ("tree", 27, [-1, 0, 1, -1, 3, 0, 5, 2, 7, 8, 1, 4]), ("decode", 36)]
    case = make_case(seqs, n_heads=2, n_kv=2, d=32, dtype=torch.float32, seed=5, paged=False,
                     q_view=True)
    assert case.args[0].stride(0) == 6 * 32
    check_triton_attention(case, torch.float32, block_n=16)


@needs_triton
def test_triton_attention_63_node_tree():
    """The largest tree: ancestor bits up to 62, in fp16, with a non-power-of-two head_dim."""
    case = make_case([("tree", 2, random_parents(random.Random(9), 63))], n_heads=2, n_kv=1, d=24,
                     dtype=torch.float16, seed=9)
    check_triton_attention(case, torch.float16)


@needs_triton
def test_triton_attention_empty_batch():
    c = make_case([("decode", 3)], n_heads=2, n_kv=1, d=16, dtype=torch.float32, seed=0).to(TDEV)
    q, kc, vc, slots, lens, q_seq, q_pos, ts, q_anc, scale = c.args
    out = get_ops("triton").paged_attention(q[:0], kc, vc, slots, lens, q_seq[:0], q_pos[:0], ts,
                                            q_anc[:0], scale)
    assert out.shape == (0, 2, 16)


@needs_triton
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_triton_store_kv(dtype):
    gen = torch.Generator().manual_seed(2)
    S, H, D, N = 40, 3, 12, 9
    kc = torch.randn(S, H, D, generator=gen).to(dtype)
    vc = torch.randn(S, H, D, generator=gen).to(dtype)
    kv = torch.randn(N, 2 * H + 1, D, generator=gen).to(dtype)   # k and v as strided views
    k, v = kv[:, :H], kv[:, H:2 * H]
    slots = torch.randperm(S, generator=gen)[:N].to(torch.int32)
    kc_ref, vc_ref = kc.clone(), vc.clone()
    TORCH.store_kv(kc_ref, vc_ref, k, v, slots)
    kc_t, vc_t = kc.to(TDEV), vc.to(TDEV)
    get_ops("triton").store_kv(kc_t, vc_t, k.to(TDEV), v.to(TDEV), slots.to(TDEV))
    assert torch.equal(kc_t.cpu(), kc_ref) and torch.equal(vc_t.cpu(), vc_ref)


@needs_triton
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("block", [None, 16], ids=["one-pass", "looped"])
def test_triton_rms_norm(dtype, block):
    gen = torch.Generator().manual_seed(4)
    wide = (torch.randn(6, 130, generator=gen) * 3).to(dtype)
    x = wide[:, :100]                                     # row stride 130
    w = torch.randn(100, generator=gen)
    ref = TORCH.rms_norm(x, w, 1e-6)
    xd, wd = x.to(TDEV), w.to(TDEV)
    out = get_ops("triton").rms_norm(xd, wd, 1e-6) if block is None else rms_norm_triton(xd, wd, 1e-6, block=block)
    assert out.dtype == dtype and out.shape == (6, 100)
    close(out.cpu(), ref, NORM_TOL[dtype])


def test_triton_in_subprocess():
    """Runs the Triton tests in a fresh process with the interpreter on, where this process
    could not (triton already imported in compiled mode). Otherwise they ran above."""
    if TRITON_SKIP is None or IN_SUBPROCESS or not backend_mod.triton_available():
        pytest.skip("the Triton tests ran in this process" if TRITON_SKIP is None
                    else f"not applicable: {TRITON_SKIP}")
    env = dict(os.environ, TRITON_INTERPRET="1", SPECSIM_KERNELS_SUBPROCESS="1")
    root = Path(__file__).resolve().parents[1]
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k",
                        "triton and not subprocess", str(Path(__file__).resolve())],
                       cwd=root, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    assert " skipped" not in r.stdout.splitlines()[-1], r.stdout[-2000:]


# Compiles the kernels' GPU path (never run by the interpreter) for sm_90 with triton's own
# toolchain, no GPU needed; run in a process without TRITON_INTERPRET. argv[1]: "small" | "full".
COMPILE_SCRIPT = r"""
import sys, torch, triton
from triton.compiler import ASTSource
from triton.backends.compiler import GPUTarget
from kernels import attention, kv_store, rmsnorm

def compile_one(kernel, types, consts, num_warps=4):
    fn = kernel(torch.device("cuda"))
    sig = dict(types, **{k: "constexpr" for k in consts})
    cx = {(fn.arg_names.index(k),): v for k, v in consts.items()}
    out = triton.compile(ASTSource(fn=fn, signature=sig, constexprs=cx),
                         target=GPUTarget("cuda", 90, 32), options={"num_warps": num_warps})
    assert "cubin" in out.asm, sorted(out.asm)

def attn(dt):
    t = {n: "*" + dt for n in ("q_ptr", "k_ptr", "v_ptr", "out_ptr")}
    t.update({n: "*i32" for n in ("slots_ptr", "lens_ptr", "qseq_ptr", "qpos_ptr", "tstart_ptr")})
    t.update(anc_ptr="*i64", scale_log2="fp32", G="i32", D="i32")
    t.update({n: "i32" for n in ("stride_qn", "stride_qh", "stride_kn", "stride_kh", "stride_vn",
                                 "stride_vh", "stride_on", "stride_oh", "stride_sb", "stride_sl")})
    return t

full = sys.argv[1] == "full"
for dt, up in [("bf16", False), ("fp32", True)] + ([("fp16", False), ("bf16", True)] if full else []):
    compile_one(attention._kernel, attn(dt), dict(G_PAD=16, D_PAD=128, BLOCK_N=64, UPCAST=up))
kv = {n: "*bf16" for n in ("k_ptr", "v_ptr", "kc_ptr", "vc_ptr")}
kv.update(slots_ptr="*i64", H="i32", D="i32")
kv.update({n: "i32" for n in ("stride_kn", "stride_kh", "stride_vn", "stride_vh", "stride_kcn",
                              "stride_kch", "stride_vcn", "stride_vch")})
compile_one(kv_store._kernel, kv, dict(H_PAD=8, D_PAD=128))
rn = dict(x_ptr="*bf16", w_ptr="*fp32", y_ptr="*bf16", stride_xn="i32", stride_yn="i32",
          n_cols="i32", eps="fp32")
for one in [False] + ([True] if full else []):
    compile_one(rmsnorm._kernel, rn, dict(BLOCK=4096, ONE_PASS=one), num_warps=8)
print("compiled")
"""


@pytest.mark.slow
@pytest.mark.skipif(not backend_mod.triton_available(), reason="triton is not installed")
def test_triton_kernels_compile_for_sm90():
    """The GPU path (native bf16/fp16 dots, ieee fp32 dots) compiles to a cubin for an H100/H200
    without a GPU. Small form: 4 compiles; SPECSIM_SLOW=full: every variant."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    form = "full" if os.environ.get("SPECSIM_SLOW") == "full" else "small"
    r = subprocess.run([sys.executable, "-c", COMPILE_SCRIPT, form], cwd=Path(__file__).resolve().parents[1],
                       env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and "compiled" in r.stdout, r.stdout[-2000:] + r.stderr[-4000:]


# --------------------------------------------------------------------------- wrapper checks

def _attn_args():
    return list(make_case([("decode", 5), ("tree", 3, [-1, 0])], n_heads=4, n_kv=2, d=8,
                          dtype=torch.float32, seed=0).args)


def _set(i, fn):
    def mutate(a):
        a[i] = fn(a[i])
        return a
    return mutate


BAD_ATTENTION = {
    "q 2-D": _set(0, lambda q: q[:, 0]),
    "heads not a multiple of n_kv": _set(0, lambda q: q[:, :3]),
    "head_dim mismatch": _set(0, lambda q: q[..., :4]),
    "v_cache shape": _set(2, lambda v: v[:-1]),
    "integer q": _set(0, lambda q: q.long()),
    "kv_slots float": _set(3, lambda s: s.float()),
    "kv_lens wrong length": _set(4, lambda t: t[:1]),
    "q_seq wrong length": _set(5, lambda t: t[:1]),
    "tree_start wrong length": _set(7, lambda t: torch.cat([t, t])),
    "q_anc int32": _set(8, lambda t: t.int()),
    "k_cache on another device": _set(1, lambda t: t.to("meta")),
    "slot out of range": _set(3, lambda s: torch.where(torch.ones_like(s, dtype=torch.bool), 10 ** 6, s).int()),
    "q_pos beyond kv_len": _set(6, lambda p: p + 100),
    "q_seq out of range": _set(5, lambda t: t + 5),
    "query does not see itself": _set(8, lambda t: torch.zeros_like(t)),
    "scale not finite": _set(9, lambda s: float("nan")),
}


@pytest.mark.parametrize("name", list(BAD_ATTENTION))
def test_attention_wrapper_rejects(name):
    args = BAD_ATTENTION[name](_attn_args())
    with pytest.raises(ValueError):
        TORCH.paged_attention(*args)


def test_attention_wrapper_rejects_strided_last_dim():
    args = _attn_args()
    q = args[0]
    args[0] = torch.stack([q, q], dim=-1)[..., 0]     # same values, last-dim stride 2
    assert args[0].stride(-1) == 2
    with pytest.raises(ValueError, match="contiguous"):
        TORCH.paged_attention(*args)


def test_attention_wrapper_accepts_good_args():
    TORCH.paged_attention(*_attn_args())
    TORCH.paged_attention(*_attn_args(), check_values=False)


def test_store_kv_wrapper_rejects():
    kc, vc = torch.zeros(10, 2, 4), torch.zeros(10, 2, 4)
    k, v = torch.ones(3, 2, 4), torch.ones(3, 2, 4)
    s = torch.tensor([1, 2, 3])
    TORCH.store_kv(kc, vc, k, v, s)
    bad = [
        (kc, vc, k[:, :1], v, s),                          # k not (N, n_kv, d)
        (kc, vc, k, v[:2], s),                             # v length
        (kc, vc[:, :, :2], k, v, s),                       # cache shapes differ
        (kc, vc, k.half(), v, s),                          # dtype mismatch
        (kc, vc, k, v, s[:2]),                             # slots length
        (kc, vc, k, v, s.float()),                         # slots dtype
        (kc, vc, k, v, s[:, None]),                        # slots 2-D
        (kc, vc, k, v, torch.tensor([1, 2, 10])),          # slot out of range
        (kc, vc, k, v, torch.tensor([1, 2, 1])),           # duplicate slot
        (kc, vc, k, v, s.to("meta")),                      # device mismatch
        (kc, kc, k, v, s),                                 # one tensor as both caches
    ]
    for args in bad:
        with pytest.raises(ValueError):
            TORCH.store_kv(*args)


def test_rms_norm_wrapper_rejects():
    x, w = torch.ones(3, 8), torch.ones(8)
    for args in [(x, w[:4], 1e-6), (x[None], w, 1e-6), (x, w, -1.0), (x.t(), torch.ones(3), 1e-6),
                 (x.long(), w, 1e-6), (x, w.to("meta"), 1e-6)]:
        with pytest.raises(ValueError):
            TORCH.rms_norm(*args)


def test_backend_selection(monkeypatch):
    assert default_backend("cpu") == "torch"
    assert default_backend(torch.device("cpu")) == "torch"
    assert get_ops("torch").name == "torch"
    with pytest.raises(ValueError, match="unknown kernel backend"):
        get_ops("cuda")
    if backend_mod.triton_available():
        assert default_backend("cuda") == "triton"
        ops = get_ops("triton")
        assert ops.name == "triton" and callable(ops.paged_attention)
        # without the interpreter, the triton backend refuses CPU tensors with a clear message
        monkeypatch.setattr(backend_mod, "interpreter_active", lambda: False)
        with pytest.raises(RuntimeError, match="TRITON_INTERPRET=1"):
            ops.rms_norm(torch.ones(2, 4), torch.ones(4), 1e-6)
