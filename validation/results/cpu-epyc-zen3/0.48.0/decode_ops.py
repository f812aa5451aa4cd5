"""Where a long-context decode's attention time goes: the CPU reference attention
(kernels.attention.paged_attention_ref) decoding S sequences after C keys in the family's
geometry (2 KV heads of 64 fp32, 4 query heads) under torch.profiler, CALLS calls after a
warm-up; each op's self CPU time a call, and the gather's bytes a call. Run from the repository
root, alone:

  python validation/results/cpu-epyc-zen3/0.48.0/decode_ops.py [S C CALLS]
"""
from __future__ import annotations

import sys
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))
from kernels.attention import NO_TREE, paged_attention_ref  # noqa: E402


def main() -> None:
    torch.set_num_threads(1)
    seqs, context, calls = (int(a) for a in sys.argv[1:4]) if len(sys.argv) > 3 else (16, 2048, 20)
    per, kv_heads, heads = context + 1, 2, 4
    g = torch.Generator().manual_seed(0)
    k, v = (torch.randn(seqs * per, kv_heads, 64, generator=g) for _ in range(2))
    q = torch.randn(seqs, heads, 64, generator=g)
    slots = torch.arange(seqs * per).view(seqs, per)
    args = (q, k, v, slots, torch.full((seqs,), per), torch.arange(seqs), torch.full((seqs,), context),
            torch.full((seqs,), NO_TREE), torch.zeros(seqs, dtype=torch.int64), 0.125)
    for _ in range(3):
        paged_attention_ref(*args)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(calls):
            paged_attention_ref(*args)
    rows = sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)
    total = sum(e.self_cpu_time_total for e in rows) / calls
    print(f"{seqs} sequences x {context} keys, {calls} calls: {total / 1e3:.2f} ms a call (self CPU, all ops); "
          f"K and V gathered {2 * seqs * per * kv_heads * 64 * 4 / 2**20:.1f} MiB a call")
    for e in rows[:12]:
        print(f"  {e.key:32} {e.self_cpu_time_total / calls / 1e3:8.3f} ms  {e.count // calls:4d} a call")


if __name__ == "__main__":
    main()
