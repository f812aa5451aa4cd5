"""A sequence's own fused-attention call against the group call, by query rows.

    python validation/results/cpu-epyc-zen4/0.51.0/own_rows.py [ROUNDS]

The engine's paged attention gives a sequence with several query tokens a call of its own when
it is the only one in its step with 2 to 64 (a lone chain or tree) or when it has more than 64
(a prefill chunk); several such sequences share padded group calls (kernels/attention.py).
Times, interleaved (one thread, the engine's allocator settings), 1 sequence verifying chains
of 2 to 64 rows and prefilling chunks of 128 to 512 causal rows, and 8 sequences verifying the
same chains (the group call), each after 128 and 1,024 keys, and prints each call's time per
key and query head between the two contexts, whole and less its products at 4.5 ns a row."""
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))
from engine.host_memory import retain_freed_memory  # noqa: E402
from validation.probes import ATTN_HEADS  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "cpu-epyc-zen3" / "0.50.0"))
from fused_rows import medians  # noqa: E402

CHAINS = (2, 3, 4, 5, 6, 7, 8, 16, 32, 64)
CHUNKS = (128, 256, 512)
LO, HI = 128, 1024


def main(rounds: int = 7) -> None:
    torch.set_num_threads(1)
    retain_freed_memory()
    calls = [(s, r, c, True) for s in (1, 8) for r in CHAINS for c in (LO, HI)]
    calls += [(1, r, c, False) for r in CHUNKS for c in (LO, HI)]
    m = medians(calls, rounds, 2)
    print(f"ns a key and query head between {LO} and {HI} keys (ms at each), less 4.5 ns a row in brackets")
    for s, r, drafts in [(1, r, True) for r in CHAINS] + [(8, r, True) for r in CHAINS] + [(1, r, False) for r in CHUNKS]:
        lo, hi = m[(s, r, LO, drafts)], m[(s, r, HI, drafts)]
        per = (hi - lo) / (ATTN_HEADS * s * (HI - LO)) * 1e9
        kind = "chain" if drafts else "chunk"
        print(f"  {s} x {kind} {r:3d}: {lo * 1e3:7.3f} {hi * 1e3:7.3f}  {per:7.1f} ({per - 4.5 * r:7.1f})")


if __name__ == "__main__":
    main(*(int(x) for x in sys.argv[1:]))
