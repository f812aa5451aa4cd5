"""Throughput of engine.verify.verify_chain against a plain per-row, per-position Python loop.

    python bench/bench_verify.py [--batch 256] [--k 4] [--vocab 32000] [--repeats 7] [--device cpu]

Both implementations run on the same inputs (float32 target/draft probabilities, drafts sampled
from the draft distribution, drafter close to the target so that a realistic share of drafts is
accepted) in one process, with torch's default thread count. Each is timed over several repeats;
the median wall time is reported as rows/s, with the ratio loop time / vectorised time. The
repeats of the two are interleaved, so that load from other processes falls on both alike. A tree line
(verify_tree, a 16-node top-k tree) is printed for information.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from engine.verify import verify_chain, verify_tree  # noqa: E402


def loop_reference(p, q, x, gen):
    """The straightforward implementation: for each row, for each draft position, one accept
    test; on rejection sample the residual max(0, p - q); else the bonus token from p_{K+1}."""
    B, K1, _ = p.shape
    K = K1 - 1
    tokens = torch.full((B, K1), -1, dtype=torch.int64)
    num = torch.zeros(B, dtype=torch.int64)
    for b in range(B):
        n = 0
        for j in range(K):
            xj = int(x[b, j])
            u = float(torch.rand((), generator=gen))
            if u * float(q[b, j, xj]) < float(p[b, j, xj]):
                tokens[b, j] = xj
                n += 1
                continue
            resid = torch.clamp(p[b, j] - q[b, j], min=0.0)
            w = resid if float(resid.sum()) > 0 else p[b, j]
            tokens[b, j] = int(torch.multinomial(w, 1, generator=gen))
            num[b] = n + 1
            break
        else:
            tokens[b, K] = int(torch.multinomial(p[b, K], 1, generator=gen))
            num[b] = K + 1
    return tokens, num


def make_inputs(B, K, V, device, seed=0):
    g = torch.Generator().manual_seed(seed)
    logits_p = torch.randn(B, K + 1, V, generator=g) * 3.0
    logits_q = logits_p[:, :K] + torch.randn(B, K, V, generator=g) * 1.0
    p = torch.softmax(logits_p, -1)
    q = torch.softmax(logits_q, -1)
    x = torch.multinomial(q.reshape(-1, V), 1, generator=g).reshape(B, K)
    return p.to(device), q.to(device), x.to(device)


def timeit(fn, repeats, sync):
    times = []
    for _ in range(repeats):
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), times


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=32_000)
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--loop-repeats", type=int, default=7)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args(argv)
    B, K, V, dev = args.batch, args.k, args.vocab, torch.device(args.device)
    sync = (lambda: torch.cuda.synchronize()) if dev.type == "cuda" else (lambda: None)

    p, q, x = make_inputs(B, K, V, dev)
    gen = torch.Generator(device=dev).manual_seed(1)
    pc, qc, xc = p.cpu(), q.cpu(), x.cpu()
    gcpu = torch.Generator().manual_seed(1)
    verify_chain(p, q, x, generator=gen)                       # warm-up
    # Interleave the two so that load from other processes hits both alike.
    all_vec, all_loop = [], []
    for r in range(max(args.repeats, args.loop_repeats)):
        if r < args.repeats:
            all_vec += timeit(lambda: verify_chain(p, q, x, generator=gen), 1, sync)[1]
        if r < args.loop_repeats:
            all_loop += timeit(lambda: loop_reference(pc, qc, xc, gcpu), 1, lambda: None)[1]
    t_vec, t_loop = statistics.median(all_vec), statistics.median(all_loop)

    _, num = verify_chain(p, q, x, generator=gen)
    print(f"verify_chain  B={B} K={K} V={V} float32 device={dev} "
          f"torch threads={torch.get_num_threads()}")
    print(f"  mean tokens emitted per row: {num.float().mean().item():.3f}")
    print(f"  vectorised : median {t_vec * 1e3:9.3f} ms  -> {B / t_vec:12,.0f} rows/s  "
          f"(repeats={args.repeats}, min {min(all_vec) * 1e3:.3f} ms)")
    print(f"  python loop: median {t_loop * 1e3:9.3f} ms  -> {B / t_loop:12,.0f} rows/s  "
          f"(repeats={args.loop_repeats}, min {min(all_loop) * 1e3:.3f} ms)")
    print(f"  speed-up (loop time / vectorised time): {t_loop / t_vec:.1f}x")

    # information only: a 16-node top-k tree (root 4 children, each 2, then 1 each... )
    parents = [-1, -1, -1, -1, 0, 0, 1, 1, 2, 3, 4, 5, 6, 8, 10, 12]
    T = len(parents)
    pt = torch.softmax(torch.randn(B, T + 1, V, generator=torch.Generator().manual_seed(2)) * 3,
                       -1).to(dev)
    toks = torch.randint(0, V, (B, T), generator=torch.Generator().manual_seed(3)).to(dev)
    verify_tree(pt, None, toks, parents, generator=gen)
    t_tree, _ = timeit(lambda: verify_tree(pt, None, toks, parents, generator=gen),
                       args.repeats, sync)
    print(f"verify_tree   B={B} T={T} V={V} top-k children: median {t_tree * 1e3:.3f} ms "
          f"-> {B / t_tree:,.0f} rows/s")


if __name__ == "__main__":
    main()
