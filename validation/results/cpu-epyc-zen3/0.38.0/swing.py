"""Do the calibration's warm product probes follow the engine's products as the host's speed moves?
(2026-12-05, 0.38.0). Run from the repository root with the project's environment, alone (2 cores):

  python validation/results/cpu-epyc-zen3/0.38.0/swing.py SECONDS [ROWS]

Cycle after cycle in one process: `none` decoding in a ROWS-request engine run at concurrency ROWS
(default 16), the target's matrix products (`@`) timed inside its decode forwards at the full
batch (median a forward); then the calibration's warm probe (validation.probes.matmul_probes
over a 16 MiB pool of one shape, validation.timing.steady_time after 5 ms of host work, as
validation.calibrate runs it) for each of the target's shapes at ROWS rows, summed over a
forward's products; and the engine's median decode step. Over the cycles: each reading's median
and spread (sd of its log), and the fit of log(probe) on log(in situ): a slope above 1 says the
probe moves further than the engine's products when the host's speed moves (the three c16
comparisons of 0.36.0-0.38.0 saw the warm probes 22% faster, then 14% slower, hour to hour,
and `none`'s engine step 6% and 3%).
"""
from __future__ import annotations

import statistics as st
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "0.35.0"))
from host_regimes import family, run_at  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "0.36.0"))
import insitu as in_situ  # noqa: E402


def main(seconds: float, rows: int) -> None:
    from validation.probes import matmul_probes
    from validation.timing import host_gap, steady_time
    trace, model, drafters, prompts = family(["none"], requests=rows)
    scheme = trace.speculation[0]
    state, recs, _ = in_situ.time_products(model)
    first = in_situ.forward_matrices(state, trace, scheme, model, drafters, prompts)
    shapes = sorted({(m.shape[0], m.shape[1]) for m in first})
    counts = {s: sum(1 for m in first if (m.shape[0], m.shape[1]) == s) for s in shapes}
    probes = matmul_probes("cpu", shapes, [rows], pool_bytes=16 << 20, shrink=True)  # as calibrate's shapes_warm
    gap = host_gap(0.005)
    print(f"the target's forward: {len(first)} products, shapes (k, n) {shapes}; {rows} rows")
    runs = []
    end = time.time() + seconds
    while time.time() < end:
        recs.clear()
        steps, _ = run_at(trace, scheme, rows, model, drafters, prompts)
        insitu = st.median(t for s, t in recs if s == rows)
        probe = 0.0
        for (k, n) in shapes:
            fn, flops = probes[(k * n * 4 // 1024, rows)]
            probe += steady_time(fn, "cpu", between=gap) / (flops / (2 * rows * k * n)) * counts[(k, n)]
        runs.append((insitu, probe, st.median(steps)))
        print(f"  cycle {len(runs)}: in situ {insitu * 1e3:.3f} ms, probe {probe * 1e3:.3f} ms, step {st.median(steps) * 1e3:.2f} ms",
              flush=True)
    a = np.log(np.array(runs))  # (cycles, 3)
    print(f"{len(runs)} cycles, {seconds:.0f} s; a forward's products at {rows} rows, median ms (sd of log)")
    for j, name in enumerate(("in situ", "probe", "engine step")):
        print(f"  {name:11} {np.exp(np.median(a[:, j])) * 1e3:7.3f} ({a[:, j].std():.3f})")
    ratio = np.exp(a[:, 1] - a[:, 0])
    q = np.quantile(ratio, [0.25, 0.75])
    fit = np.polyfit(a[:, 0], a[:, 1], 1)
    print(f"  probe over in situ {np.median(ratio):.3f} ({q[0]:.3f}-{q[1]:.3f}); log(probe) on log(in situ): slope {fit[0]:.2f}, "
          f"correlation {np.corrcoef(a[:, 0], a[:, 1])[0, 1]:+.2f}")
    fit2 = np.polyfit(a[:, 2], a[:, 0], 1)
    print(f"  log(in situ) on log(engine step): slope {fit2[0]:.2f}, correlation {np.corrcoef(a[:, 2], a[:, 0])[0, 1]:+.2f}")


if __name__ == "__main__":
    torch.set_num_threads(1)
    main(float(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 16)
