"""The fused-attention call's time per key by the size of its sequences' K and V.

    python validation/results/cpu-epyc-zen3/0.50.0/fused_sizes.py [ROUNDS]

Times the engine's paged attention (validation.probes.attention_probe: the family's geometry,
fp32, one thread, the engine's allocator settings, interleaved) for 4 to 32 sequences verifying
chains of 4 and 8 rows, each between two contexts, and prints the time per key and query head
between them beside the K and V the calls gather (MiB a call, at the two contexts). The
reference chunks a group call at 2^22 floats of K, V and scores (16 MiB), so the larger sizes
run as 2 or 3 calls."""
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))
from engine.host_memory import retain_freed_memory  # noqa: E402
from validation.probes import ATTN_HEADS  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fused_rows import medians  # noqa: E402

SETS = ((4, 128, 1024), (8, 128, 1024), (16, 128, 1024), (4, 1024, 2048), (8, 1024, 2048), (16, 1024, 2048),
        (16, 2048, 3072), (32, 512, 1024))  # (sequences, context from, context to)


def main(rounds: int = 9) -> None:
    torch.set_num_threads(1)
    retain_freed_memory()
    m = medians(sorted({(s, r, c, True) for s, a, b in SETS for c in (a, b) for r in (4, 8)}), rounds, 2)
    for r in (4, 8):
        for s, a, b in SETS:
            per = (m[(s, r, b, True)] - m[(s, r, a, True)]) / (ATTN_HEADS * s * (b - a)) * 1e9
            print(f"rows {r} x {s:2d} sequences, {a:4d} -> {b:4d} keys: K and V {s * (a + r) / 1024:5.1f} -> "
                  f"{s * (b + r) / 1024:5.1f} MiB, {per:6.1f} ns a key and query head")


if __name__ == "__main__":
    main(*(int(x) for x in sys.argv[1:]))
