"""The CPU reference attention's chunk bound, side by side (kernels/attention.py
paged_attention_ref, max_elems): decode and chain-verify calls of the trained family's geometry
(2 KV heads, 4 query heads) and a Llama-like one (8 KV heads, 32 query heads), fp32, at 2^25
floats (the bound before 0.48.0), 2^23, 2^22 (the default since) and 2^21, interleaved over
ROUNDS rounds in one process; medians, and each bound's time as a ratio of 2^25's. 2^25's
largest calls vary from run to run with the process's heap
(bench/results/attention-chunks-2026-12-06.txt).

    python bench/bench_attention_chunks.py [ROUNDS]
"""
from __future__ import annotations

import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from kernels.attention import paged_attention_ref  # noqa: E402
from validation.probes import attention_args  # noqa: E402
from validation.timing import mean_time  # noqa: E402

SHAPES = [  # (label, seqs, context, queries each, kv heads, query heads)
    ("family decode", 16, 2048, 1, 2, 4), ("family chain1", 16, 2048, 2, 2, 4), ("family chain2", 16, 2048, 3, 2, 4),
    ("family chain3", 16, 2048, 4, 2, 4), ("family decode", 16, 512, 1, 2, 4), ("family chain2", 16, 512, 3, 2, 4),
    ("family decode", 32, 256, 1, 2, 4), ("family chain4", 32, 256, 5, 2, 4),
    ("llama decode", 16, 2048, 1, 8, 32), ("llama chain2", 16, 2048, 3, 8, 32), ("llama decode", 4, 2048, 1, 8, 32),
]
ELEMS = (1 << 25, 1 << 23, 1 << 22, 1 << 21)


def call(seqs, context, queries, kv_heads, heads, max_elems):
    """paged_attention_ref at `max_elems` over the calibration's probe batch (chains verified
    behind a root where queries > 1, as validation.probes.attention_args lays them out)."""
    args = attention_args("cpu", seqs, context, queries, heads, kv_heads, drafts=True)
    return lambda: paged_attention_ref(*args, 0.125, max_elems=max_elems)


def main() -> None:
    torch.set_num_threads(1)
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    calls = [(i, e, call(*s[1:], e)) for i, s in enumerate(SHAPES) for e in ELEMS]
    got: dict = {}
    for r in range(rounds):
        for i, e, fn in (calls if r % 2 == 0 else calls[::-1]):
            got.setdefault((i, e), []).append(mean_time(fn, "cpu", 3, min_s=0.2))
    print(f"{rounds} rounds, medians, ms a call; max_elems " + " / ".join(f"2^{e.bit_length() - 1}" for e in ELEMS))
    for i, (label, s, c, q, kvh, h) in enumerate(SHAPES):
        ts = [statistics.median(got[(i, e)]) for e in ELEMS]
        print(f"{label:14} {s:3d} x {c:5d} keys, {q} q, {kvh}/{h} heads: "
              + "  ".join(f"{t * 1e3:8.3f}" for t in ts) + "   ratios " + " ".join(f"{t / ts[0]:.2f}" for t in ts[1:]))


if __name__ == "__main__":
    main()
