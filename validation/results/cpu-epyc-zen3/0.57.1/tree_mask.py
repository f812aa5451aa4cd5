"""What a drafter pass's tree mask costs the CPU reference attention (2026-12-08, 0.57.1).

A model drafter's pass (engine.drafting.store.pack) gives every drafted entry a tree (tree_start
before it, its ancestors' bits in q_anc), so a pass in which each sequence has one query row (a
chain's or tree level's later pass, the draft model's) runs kernels.attention._attend with the
tree branch of _visible (its bits scattered into the visibility), which a plain decode of the
same shape (tree_start NO_TREE) skips. The simulator prices such a pass as a plain decode
(sim.drafters.PassPricer: mixed 0, no multi-query host time), and the calibration's drafter host
probes time the host work outside the drafter's forward calls (validation.drafter_host.PassClock),
so this difference is priced nowhere. Here: paged_attention_ref on the family's head geometry
(4 heads, 2 KV heads, 64 wide) over 200 keys at 1, 4, 16 and 32 sequences, plain and as a
depth-3 chain node, the two interleaved 15 times, 20 calls each; medians (us a call).

  python validation/results/cpu-epyc-zen3/0.57.1/tree_mask.py
"""
import statistics
import time

import torch

from kernels.attention import NO_TREE, paged_attention_ref

HEADS, KV_HEADS, WIDTH, KEYS = 4, 2, 64, 200


def args(n: int, tree: bool, gen: torch.Generator) -> tuple:
    """paged_attention_ref's arguments: n sequences of KEYS keys, one query each (the last)."""
    slots = n * 256 + 4096
    kc, vc = torch.randn(slots, KV_HEADS, WIDTH, generator=gen), torch.randn(slots, KV_HEADS, WIDTH, generator=gen)
    kv_slots = torch.stack([torch.randperm(slots, generator=gen)[:KEYS + 8] for _ in range(n)])  # (n, L)
    lens = torch.full((n,), KEYS + 1, dtype=torch.int64)
    q = torch.randn(n, HEADS, WIDTH, generator=gen)
    pos = torch.full((n,), KEYS, dtype=torch.int64)
    start = torch.full((n,), KEYS - 2 if tree else NO_TREE, dtype=torch.int64)  # a depth-3 chain node
    anc = torch.full((n,), 0b111 if tree else 0, dtype=torch.int64)
    return q, kc, vc, kv_slots, lens, torch.arange(n), pos, start, anc, WIDTH ** -0.5


def main() -> None:
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(0)
    for n in (1, 4, 16, 32):
        cases = {"plain": args(n, False, gen), "tree": args(n, True, gen)}
        for a in cases.values():
            for _ in range(20):
                paged_attention_ref(*a)
        got: dict = {k: [] for k in cases}
        for _ in range(15):
            for k, a in cases.items():
                t0 = time.perf_counter()
                for _ in range(20):
                    paged_attention_ref(*a)
                got[k].append((time.perf_counter() - t0) / 20)
        med = {k: statistics.median(v) * 1e6 for k, v in got.items()}
        print(f"{n:2} sequences: plain {med['plain']:7.1f} us, tree {med['tree']:7.1f} us, the tree's mask {med['tree'] - med['plain']:+6.1f} us")


if __name__ == "__main__":
    main()
