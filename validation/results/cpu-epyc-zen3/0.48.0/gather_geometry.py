"""Does a decode gather's rate depend on its rows' width? The calibration's gather probes
(validation.probes.KV_SIZES) read the family's geometry (2 KV heads: 512-byte rows of K or V,
4 query heads) at 0.5 and 2 MiB only, and a Llama-like one (8 KV heads, 2 KiB rows, 1 query head
each) at 8, 32 and 128 MiB; the family's decodes at 16 sequences after 2,048 keys gather 32 MiB a
layer and priced 20-24% under the engine in 0.47.0's three step-time grids. Here both geometries at every size,
each call the engine's paged attention (validation.probes.kv_gather_probe), interleaved over
ROUNDS rounds, medians, as ns per KiB of K and V. Run from the repository root, alone:

  python validation/results/cpu-epyc-zen3/0.48.0/gather_geometry.py [ROUNDS]
"""
from __future__ import annotations

import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))
from validation.probes import KV_HEADS, SMALL_KV_HEADS, kv_gather_bytes, kv_gather_probe  # noqa: E402
from validation.timing import mean_time  # noqa: E402

# (sequences, keys) per geometry at 0.5, 2, 8, 32 and 128 MiB of K and V
SIZES = {SMALL_KV_HEADS: ((4, 128), (16, 128), (16, 512), (16, 2048), (64, 2048)),
         KV_HEADS: ((1, 128), (4, 128), (8, 256), (8, 1024), (16, 2048))}


def main() -> None:
    torch.set_num_threads(1)
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    calls = [(h, s, c, kv_gather_probe("cpu", s, c, h)) for h, sizes in SIZES.items() for s, c in sizes]
    got: dict = {}
    for r in range(rounds):
        for h, s, c, fn in (calls if r % 2 == 0 else calls[::-1]):
            got.setdefault((h, s, c), []).append(mean_time(fn, "cpu", 3, min_s=0.2))
    print(f"{rounds} rounds, medians; ns per KiB of K and V read (a call's fixed part included)")
    for h, sizes in SIZES.items():
        for s, c in sizes:
            t, b = statistics.median(got[(h, s, c)]), kv_gather_bytes(s, c, h)
            print(f"kv heads {h}  {s:3d} seqs x {c:5d} keys  {b / 2**20:6.1f} MiB  {t * 1e3:8.3f} ms  "
                  f"{t / (b / 1024) * 1e9:7.1f} ns/KiB")


if __name__ == "__main__":
    main()
