"""Whether the reference attention's group call costs more when its sequences' lengths differ
(it gathers every sequence's keys up to the group's longest, kernels/attention.py
_attend_group), at the same keys in all: the family's geometry (4 query heads, 2 KV heads, 64
dims), S sequences with Q query rows each (a chain of Q - 1; Q = 1: decoding), lengths all
MEAN, or spread evenly over [MEAN / 3, 5 MEAN / 3] (the same sum).

    python validation/results/cpu-epyc-zen4/0.54.0/padding.py [ROUNDS]

One thread, freed memory retained as `python -m engine` runs. Each call is timed in a hot loop (median of 30 calls after 3), the two layouts alternating
round by round; prints each round's medians and, over the rounds, the spread layout's extra
time, in us and in us per sequence."""
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))
from engine.host_memory import retain_freed_memory  # noqa: E402
from kernels.attention import NO_TREE, ancestor_masks, paged_attention_ref  # noqa: E402

H, KV, D = 4, 2, 64


def inputs(lens: list[int], q: int):
    """The call's arguments for sequences of `lens` keys each (their q query tokens the last q:
    a chain, its drafts at positions past the committed length)."""
    S = len(lens)
    slots = sum(lens)
    k_cache, v_cache = torch.randn(slots, KV, D), torch.randn(slots, KV, D)
    L = max(lens)
    kv = torch.zeros(S, L, dtype=torch.int64)
    start = 0
    qseq, qpos, tstart, anc = [], [], [], []
    for b, n in enumerate(lens):
        kv[b, :n] = torch.arange(start, start + n)
        start += n
        end = n - (q - 1)  # committed keys; the chain's drafts after them
        qseq += [b] * q
        qpos += list(range(end - 1, end - 1 + q))
        if q > 1:
            tstart.append(end)
            anc += [0] + ancestor_masks([-1] + list(range(q - 2)))  # each draft sees its ancestors
        else:
            tstart.append(NO_TREE)
            anc += [0]
    t = lambda x: torch.tensor(x, dtype=torch.int64)  # noqa: E731
    return (torch.randn(S * q, H, D), k_cache, v_cache, kv, t(lens), t(qseq), t(qpos), t(tstart), t(anc), 0.125)


LAYOUTS = ((4, 2, 300), (16, 2, 300), (32, 2, 300), (32, 3, 300), (32, 6, 300), (32, 1, 300))  # (S, Q, MEAN)


def layouts(S: int, mean: int) -> tuple[list[int], list[int]]:
    """The keys of S sequences: all `mean`, and spread evenly over [mean / 3, 5 mean / 3] (the same sum)."""
    even = [mean] * S
    spread = [round(mean / 3 + (4 * mean / 3) * i / (S - 1)) for i in range(S)]
    spread[-1] += sum(even) - sum(spread)
    return even, spread


def timed(args, calls=30, skip=3) -> float:
    got = []
    for i in range(skip + calls):
        t0 = time.perf_counter()
        paged_attention_ref(*args)
        if i >= skip:
            got.append(time.perf_counter() - t0)
    return statistics.median(got)


def main(rounds: str = "5") -> None:
    torch.set_num_threads(1)
    retain_freed_memory()  # as the engine runs (engine/host_memory.py)
    for S, q, mean in LAYOUTS:
        even, spread = layouts(S, mean)
        a, b = inputs(even, q), inputs(spread, q)
        extra = []
        for r in range(int(rounds)):
            te, ts = timed(a), timed(b)
            extra.append(ts - te)
            print(f"{S:2} sequences, {q} rows, round {r + 1}: lengths even {te * 1e6:7.1f} us, spread {ts * 1e6:7.1f} us", flush=True)
        x = statistics.median(extra)
        print(f"{S:2} sequences, {q} rows: spread over even {x * 1e6:+7.1f} us a call, {x / S * 1e6:+5.1f} us a sequence", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
