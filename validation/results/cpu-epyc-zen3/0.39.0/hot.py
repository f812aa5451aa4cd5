"""How much faster do the family's matrix products run when their weights were used moments before
(a drafter's later passes, or the LM head a drafter shares with the target) than the warm curves'
products, whose weights wait 5 ms of host work between passes? (2026-12-05, 0.39.0). Run from the
repository root with the project's environment, alone (2 cores):

  python validation/results/cpu-epyc-zen3/0.39.0/hot.py SECONDS

Cycle after cycle, for each of the family's matrix shapes (the target's, the EAGLE head's and the
MTP modules' 2h -> h projection) at 1 and 4 rows: the calibration's warm probe (a 16 MiB pool of
the shape, validation.timing.steady_time after 5 ms of host work); the same pool timed steady back
to back (`hot`); the same pool after 1 ms of host work (`gap1`: weights used again one
drafter pass later); and one matrix of the shape timed steady back to back (`hot1`: a drafter's
own matrix, used once a pass, its passes back to back). Medians over cycles of each product's
microseconds and the ratios to the warm probe. drafter_parts.txt has the in-situ side: the
target's LM head at 1 row 371 us in `none`'s forwards (walk.txt), the MTP modules' 208 us, EAGLE's
192 us a pass.
"""
from __future__ import annotations

import statistics as st
import sys
import time

import torch

SHAPES = ((256, 512), (256, 256), (256, 1536), (768, 256), (256, 4096), (512, 256))  # (k, n) of x @ W.T


def main(seconds: float) -> None:
    from validation.probes import matmul_probes
    from validation.timing import host_gap, steady_time
    gap, gap1 = host_gap(0.005), host_gap(0.001)
    rows = (1, 4)
    pools = matmul_probes("cpu", SHAPES, rows, pool_bytes=16 << 20, shrink=True)
    ones = matmul_probes("cpu", SHAPES, rows, pool_bytes=1, shrink=True)  # one matrix each
    out: dict = {}
    end = time.time() + seconds
    cycles = 0
    while time.time() < end:
        for (k, n) in SHAPES:
            for r in rows:
                key = (k * n * 4 // 1024, r)
                (fp, flops), (f1, flops1) = pools[key], ones[key]
                per, per1 = 2 * r * k * n / flops, 2 * r * k * n / flops1  # one product's share of a call
                for name, t in (("warm", steady_time(fp, "cpu", between=gap) * per),
                                ("hot", steady_time(fp, "cpu") * per), ("gap1", steady_time(fp, "cpu", between=gap1) * per),
                                ("hot1", steady_time(f1, "cpu") * per1)):
                    out.setdefault((k, n, r, name), []).append(t)
        cycles += 1
    print(f"{cycles} cycles, {seconds:.0f} s; us a product, median over cycles; hot, gap1 and hot1 over warm")
    for (k, n) in SHAPES:
        for r in rows:
            w, h, g1, h1 = (st.median(out[(k, n, r, x)]) * 1e6 for x in ("warm", "hot", "gap1", "hot1"))
            print(f"  ({k:3}, {n:4}) x {r} rows: warm {w:7.1f}  hot {h:7.1f} ({h / w:.2f})  gap1 {g1:7.1f} ({g1 / w:.2f})  "
                  f"hot1 {h1:7.1f} ({h1 / w:.2f})")


if __name__ == "__main__":
    torch.set_num_threads(1)
    main(float(sys.argv[1]))
