"""The fused-attention call's time per key by its query rows: why the profile has fused_rows.

    python validation/results/cpu-epyc-zen3/0.50.0/fused_rows.py [ROUNDS]

Times the engine's paged attention (validation.probes.attention_probe: the family's 4 query heads
on 2 KV heads of 64) for 4 and 8 sequences verifying chains of 2 to 64 rows after 256 and 1,024
keys, interleaved, one thread, the engine's allocator settings, and prints each rows' time per
key and query head between the two contexts: whole, and less 4.5 ns a row (about the products'
part). Then 4 sequences at 2 to 8 rows after 2,044 to 2,048 keys: the rows, not the alignment of
the keys, set the rate."""
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))
from engine.host_memory import retain_freed_memory  # noqa: E402
from validation.probes import ATTN_HEADS, attention_probe  # noqa: E402
from validation.timing import interleaved_times  # noqa: E402

ROWS = (2, 3, 4, 5, 6, 7, 8, 12, 16, 24, 32, 48, 64)


def medians(calls, rounds, per_round=3):
    """{call: median over `rounds` of its mean time}, the calls interleaved, `per_round` each a round."""
    fns = {a: attention_probe("cpu", *a) for a in calls}
    samples = {a: [] for a in calls}
    for _ in range(rounds):
        for a, t in interleaved_times(fns, "cpu", per_round).items():
            samples[a].append(t)
    return {a: statistics.median(v) for a, v in samples.items()}


def main(rounds: int = 9) -> None:
    torch.set_num_threads(1)
    retain_freed_memory()
    for seqs in (4, 8):
        t = medians([(seqs, r, c, True) for r in ROWS for c in (256, 1024)], rounds)
        print(f"{seqs} sequences, after 256 and 1,024 keys (ms), per key and query head between them (ns):")
        for r in ROWS:
            lo, hi = t[(seqs, r, 256, True)], t[(seqs, r, 1024, True)]
            per = (hi - lo) / (ATTN_HEADS * seqs * 768) * 1e9
            print(f"  rows {r:2d}: {lo * 1e3:6.3f} {hi * 1e3:6.3f}   {per:6.1f}, less 4.5 a row {per - 4.5 * r:6.1f}")
    t = medians([(4, q, c, True) for q in (2, 3, 4, 5, 6, 8) for c in (2044, 2045, 2046, 2048)], rounds)
    print("4 sequences after 2,044-2,048 keys (ms):")
    for q in (2, 3, 4, 5, 6, 8):
        print(f"  rows {q}: " + "  ".join(f"{c} keys {t[(4, q, c, True)] * 1e3:6.3f}" for c in (2044, 2045, 2046, 2048)))


if __name__ == "__main__":
    main(*(int(x) for x in sys.argv[1:]))
