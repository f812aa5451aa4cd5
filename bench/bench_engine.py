"""Decode on this machine: is the engine's step memory-bound, and where is the knee?

1. Copy bandwidth: median time of `dst.copy_(src)` on a 1 GiB fp32 tensor (bytes moved = 2 x size).
2. Batch-1 decode step of a random-weight model big enough to be memory-bound here (default:
   llama-3.2-1b's shape cut to 4 layers, ~2 GB of fp32 weights): achieved weight-streaming
   bandwidth = bytes the step must read (weights + KV) / step time, as a fraction of (1).
3. Batch sweep 1..64: step time, tokens/s, achieved FLOP/s; the knee is where the step time
   starts growing ~linearly with the batch (compute takes over from weight streaming).

The step is the engine's own (`engine.model.Model.forward` over the paged cache, torch kernels),
every sequence decoding one token over a short context. Medians over repeats.

    python bench/bench_engine.py [--layers 4] [--context 32] [--repeats 5] [--threads 2]
"""
from __future__ import annotations

import argparse
import os
import statistics
import time
from dataclasses import replace

# Spinning OpenMP threads stall every small op for milliseconds on this small shared VM; wait
# passively (must be set before torch loads; an explicit setting wins).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402

from engine.kv_cache import KVCache  # noqa: E402
from engine.model import Model, SeqQuery, StepBatch  # noqa: E402
from sim.models import model_from_node  # noqa: E402
from sim.specio import Node  # noqa: E402

BATCHES = (1, 2, 4, 8, 16, 32, 64)


class CopyProbe:
    """dst.copy_(src) on a 1 GiB fp32 tensor; bandwidth = 2 x size / time (read + write)."""

    def __init__(self, gib: float = 1.0):
        n = int(gib * 2**30) // 4
        self.src = torch.ones(n, dtype=torch.float32)
        self.dst = torch.empty_like(self.src)
        self.bytes = 2 * n * 4
        for _ in range(2):
            self()

    def __call__(self) -> float:
        t0 = time.perf_counter()
        self.dst.copy_(self.src)
        return time.perf_counter() - t0


def decode_setup(model: Model, batch: int, context: int, page_size: int = 16):
    """A cache holding `batch` sequences of `context` tokens, and the decode step over them."""
    per_seq = -(-(context + 1) // page_size)
    cache = KVCache(model.spec, batch * per_seq, page_size)
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        cache.data.normal_(generator=g)
    queries = []
    for b in range(batch):
        base = b * per_seq * page_size
        index = list(range(base, base + context + 1))
        queries.append(SeqQuery(tokens=[(7 * b + 3) % model.spec.vocab], ctx=context, index=index))
    return cache, StepBatch.pack(queries)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", default="llama-3.2-1b")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--context", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    copy = CopyProbe()
    spec = model_from_node(Node(args.shape, None, "shape"), None)
    spec = replace(spec, layers=args.layers, bytes_per_weight=4, bytes_per_kv=4)
    t0 = time.perf_counter()
    model = Model.random(spec, seed=0)
    w_bytes = model.weight_bytes
    # what a decode step reads: every layer, the final norm, and the LM head (the embedding
    # gather touches one row per token); tied: the embedding matrix is the head
    streamed = w_bytes - (0 if model.lm_head is model.embed else model.embed.numel() * 4)
    print(f"model: random {spec.name} cut to {spec.layers} layers, {w_bytes / 1e9:.2f} GB fp32 weights "
          f"({streamed / 1e9:.2f} GB read per step), built in {time.perf_counter() - t0:.1f}s; "
          f"{args.threads} threads, context {args.context}")

    # The machine is shared: measure round-robin (copy, then every batch size, repeat) so that
    # a busy spell hits every configuration alike, then take medians.
    setups = {B: decode_setup(model, B, args.context) for B in BATCHES}
    for B, (cache, step) in setups.items():
        model.forward(step, cache)  # warm-up
    copy_t: list[float] = []
    step_t: dict[int, list[float]] = {B: [] for B in BATCHES}
    for _ in range(args.repeats):
        copy_t.append(copy())
        for B, (cache, step) in setups.items():
            t0 = time.perf_counter()
            model.forward(step, cache)
            step_t[B].append(time.perf_counter() - t0)
    bw = copy.bytes / statistics.median(copy_t)
    print(f"copy bandwidth (1 GiB dst.copy_(src), 2 x size / median time): {bw / 1e9:.2f} GB/s")

    rows = []
    kv_tok = spec.layers * 2 * spec.kv_heads * spec.head_dim * 4
    flops_tok = 2 * spec.params_active
    for B in BATCHES:
        t = statistics.median(step_t[B])
        nbytes = streamed + B * (args.context + 1) * kv_tok
        rows.append((B, t, B / t, nbytes / t, B * flops_tok / t))

    t1 = rows[0][1]
    print()
    print(f"{'batch':>5} {'step ms':>9} {'tok/s':>9} {'x t(1)':>7} {'GB/s':>7} {'% copy BW':>9} {'GFLOP/s':>8}")
    for B, t, tps, bps, fps in rows:
        print(f"{B:>5} {t * 1e3:>9.1f} {tps:>9.1f} {t / t1:>7.2f} {bps / 1e9:>7.2f} {100 * bps / bw:>8.1f}% "
              f"{fps / 1e9:>8.1f}")
    frac = rows[0][3] / bw
    print(f"\nbatch-1 decode streams {rows[0][3] / 1e9:.2f} GB/s = {100 * frac:.0f}% of copy bandwidth "
          f"(target >= 85%; a read-only stream can beat a copy, whose writes also cost reads)")
    # knee: the first batch whose doubling raises the step time by more than half (growth closer to
    # linear than to flat); beyond it each added sequence costs about the marginal time below
    knee = next((rows[i][0] for i in range(len(rows) - 1) if rows[i + 1][1] / rows[i][1] > 1.5), None)
    (b1, ta), (b2, tb) = (rows[-2][0], rows[-2][1]), (rows[-1][0], rows[-1][1])
    print(f"knee: the step time starts growing ~linearly after batch {knee if knee else '> ' + str(BATCHES[-1])} "
          f"(doubling it costs > 1.5x); marginal cost at batch {b1}-{b2}: {(tb - ta) / (b2 - b1) * 1e3:.1f} ms "
          f"per sequence vs {t1 * 1e3:.1f} ms for the whole batch-1 step")

if __name__ == "__main__":
    main()
