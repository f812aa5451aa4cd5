"""GPU timing of the Triton kernels against their torch references (kernels/).

    python bench/bench_kernels.py [--dtype bfloat16] [--heads 32] [--kv-heads 8] [--head-dim 128]
                                  [--page-size 16] [--repeats 20]

Cases: paged-attention decode (B sequences x one token at context C), a tree verify (B
sequences x a 16-node tree), a prefill chunk (one sequence, 512 new tokens after 1024 of
context); store_kv of 4096 tokens; rms_norm of 4096 x 4096. Each case is checked once against
the torch reference, then timed with CUDA events (median of --repeats after a warm-up); the
attention lines report the effective K/V bandwidth (bytes of visible K/V read / time).

Needs a CUDA GPU: on a machine without one it says so and exits 0.
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from kernels import NO_TREE, ancestor_masks, get_ops  # noqa: E402


def cuda_time(fn, repeats):
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e-3)
    return statistics.median(times)


def attention_inputs(seqs, H, n_kv, D, page_size, dtype, dev, gen):
    """seqs: list of (context_len, new_positions, parents or None). Pages shuffled in the pool."""
    lens = [c + n for c, n, _ in seqs]
    pages_per = [-(-L // page_size) for L in lens]
    perm = torch.randperm(sum(pages_per), generator=gen)
    S = sum(pages_per) * page_size
    L_max = max(lens)
    kv_slots = torch.zeros(len(seqs), L_max, dtype=torch.int32)
    q_seq, q_pos, q_anc, starts, at = [], [], [], [], 0
    for b, ((c, n, parents), L) in enumerate(zip(seqs, lens)):
        pages = perm[at:at + pages_per[b]]
        at += pages_per[b]
        pos = torch.arange(L)
        kv_slots[b, :L] = (pages[pos // page_size] * page_size + pos % page_size).to(torch.int32)
        q_seq += [b] * n
        q_pos += list(range(c, L))
        if parents is None:
            starts.append(NO_TREE)
            q_anc += [0] * n
        else:                               # the root token at c, tree nodes from c + 1
            starts.append(c + 1)
            q_anc += [0] + ancestor_masks(parents)
    N = len(q_seq)
    k_cache = torch.randn(S, n_kv, D, generator=gen).to(dtype)
    v_cache = torch.randn(S, n_kv, D, generator=gen).to(dtype)
    q = torch.randn(N, H, D, generator=gen).to(dtype)
    i32 = dict(dtype=torch.int32)
    args = (q, k_cache, v_cache, kv_slots, torch.tensor(lens, **i32), torch.tensor(q_seq, **i32),
            torch.tensor(q_pos, **i32), torch.tensor(starts, **i32),
            torch.tensor(q_anc, dtype=torch.int64), D ** -0.5)
    kv_bytes = sum(L for L in lens) * n_kv * D * 2 * k_cache.element_size()
    return tuple(a.to(dev) if isinstance(a, torch.Tensor) else a for a in args), kv_bytes


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dtype", default="bfloat16", choices=["float16", "bfloat16", "float32"])
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--page-size", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=20)
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("bench_kernels.py needs a CUDA GPU (the Triton kernels are timed on device); none here.")
        return 0
    dev, dtype = torch.device("cuda"), getattr(torch, args.dtype)
    H, n_kv, D, ps = args.heads, args.kv_heads, args.head_dim, args.page_size
    tri, ref = get_ops("triton"), get_ops("torch")
    gen = torch.Generator().manual_seed(0)
    tol = 1e-3 if dtype == torch.float32 else 3e-2
    print(f"{torch.cuda.get_device_name()}  dtype={args.dtype} heads={H} kv_heads={n_kv} head_dim={D}")

    tree16 = [-1, -1, -1, -1, 0, 0, 1, 1, 2, 3, 4, 5, 6, 8, 10, 12]
    cases = [
        ("decode  B=64  ctx=2048", [(2048, 1, None)] * 64),
        ("decode  B=256 ctx=1024", [(1024, 1, None)] * 256),
        ("decode  B=8   ctx=8192", [(8192, 1, None)] * 8),
        ("tree16  B=32  ctx=1024", [(1024, 17, tree16)] * 32),
        ("prefill 1x512 ctx=1024", [(1024, 512, None)]),
    ]
    for name, seqs in cases:
        a, kv_bytes = attention_inputs(seqs, H, n_kv, D, ps, dtype, dev, gen)
        err = (tri.paged_attention(*a).float() - ref.paged_attention(*a).float()).abs().max().item()
        t_tri = cuda_time(lambda: tri.paged_attention(*a), args.repeats)
        t_ref = cuda_time(lambda: ref.paged_attention(*a), max(3, args.repeats // 4))
        flag = "" if err <= tol else f"  MISMATCH (> {tol})"
        print(f"attention {name}: triton {t_tri * 1e6:9.1f} us ({kv_bytes / t_tri / 1e9:7.1f} GB/s)  "
              f"torch {t_ref * 1e6:10.1f} us  max|diff| {err:.2e}{flag}")

    N, S = 4096, 65536
    kc = torch.zeros(S, n_kv, D, dtype=dtype, device=dev)
    vc = torch.zeros_like(kc)
    k = torch.randn(N, n_kv, D, device=dev).to(dtype)
    v = torch.randn_like(k)
    slots = torch.randperm(S, device=dev)[:N]
    t_tri = cuda_time(lambda: tri.store_kv(kc, vc, k, v, slots), args.repeats)
    t_ref = cuda_time(lambda: ref.store_kv(kc, vc, k, v, slots), args.repeats)
    print(f"store_kv  N={N}: triton {t_tri * 1e6:9.1f} us  torch {t_ref * 1e6:9.1f} us")

    x = torch.randn(4096, 4096, device=dev).to(dtype)
    w = torch.randn(4096, device=dev).to(dtype)
    err = (tri.rms_norm(x, w, 1e-5).float() - ref.rms_norm(x, w, 1e-5).float()).abs().max().item()
    t_tri = cuda_time(lambda: tri.rms_norm(x, w, 1e-5), args.repeats)
    t_ref = cuda_time(lambda: ref.rms_norm(x, w, 1e-5), args.repeats)
    print(f"rms_norm  4096x4096: triton {t_tri * 1e6:9.1f} us  torch {t_ref * 1e6:9.1f} us  "
          f"max|diff| {err:.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
