"""Does a weight product's speed depend on its matrix's shape, not only its size? The models'
own matrices against the calibration's matmul probes, timed side by side in one run.

The calibration (validation/calibrate.py) times `x @ W.T` over M = 1..512 rows for four matrix
shapes (GEMM_SIZES: k x n with n = 3-4 k, 0.75 to 64 MiB) and the cost model prices every matrix
from those curves by its size alone (sim.cost.gemm_curve: blended in log size). Here each
model's own matrices (fused QKV, output projection, fused gate-up, down, LM head; the step-time
grid's models, validation.steptime.MODELS) and the probes' shapes are timed in the same rounds,
weights cold as the calibration's are (validation.probes.matmul_probes: each call a pass over
distinct copies filling at least `--pool-mb`), and printed per shape and rows:
- `run`: the rate as a fraction of the profile's peak (times eta_compute);
- `priced`: what the profile prices that matrix at (sim.cost.row_efficiency: its shape's curve
  where the profile measured one, gemm_shapes, else its size's);
- `x probes`: the rate over the probes' rates measured in this run, blended in log size as the
  cost model blends their curves. The host's level cancels out of it: 1.00 says the size alone
  prices this matrix; above 1 it runs faster than its size's probes.
Medians over `--rounds` rounds, each shape's calls of a round back to back.

    python bench/bench_matmul_shapes.py --hardware PROFILE [--rounds 5] [--rows 1,4,8,16,32,64]
"""
from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
from dataclasses import replace
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sim.cost import row_efficiency, weight_shapes  # noqa: E402
from sim.hardware import hardware_from_node  # noqa: E402
from sim.models import ModelSpec, model_from_node  # noqa: E402
from sim.specio import Node  # noqa: E402
from validation.calibrate import GEMM_SIZES  # noqa: E402
from validation.probes import matmul_probes  # noqa: E402
from validation.steptime import MODELS, ROOT  # noqa: E402
from validation.timing import mean_time  # noqa: E402


def model_shapes(m: ModelSpec) -> dict[str, tuple[int, int]]:
    """(k, n) of each matrix the engine multiplies a token row by (engine.model.Model.forward:
    `h @ W.T` with W (n, k)), named: sim.cost.weight_shapes and the LM head."""
    (qkv, wo), (gate_up, down), _ = weight_shapes(m, 1)
    named = {"qkv": qkv, "wo": wo, "gate_up": gate_up, "down": down, "head": (m.hidden, m.vocab)}
    return {name: (int(k), int(n)) for name, (k, n) in named.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hardware", type=Path, default=ROOT / "traces/hardware/cpu-measured.yaml")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--rows", default="1,4,8,16,32,64")
    ap.add_argument("--pool-mb", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    rows = [int(r) for r in a.rows.split(",")]
    hw = hardware_from_node(Node(str(a.hardware), str(a.hardware), "hardware"), ROOT)
    peak = hw.peak("fp32") * hw.eta_compute
    shapes = {f"probe {k}x{n}": (k, n) for k, n in GEMM_SIZES}
    for name, changes in MODELS["cpu"]:
        spec = replace(model_from_node(Node(name, "bench", "model"), ROOT), **changes)
        shapes.update({f"{name} {mat}": kn for mat, kn in model_shapes(spec).items()})
    # (shape, rows) -> (call, FLOPs): one shape at a time, as the probes key theirs by size alone
    calls = {(s, m): c for s, kn in shapes.items() for (_, m), c in matmul_probes("cpu", [kn], rows,
                                                                                  a.pool_mb << 20).items()}
    times: dict = {key: [] for key in calls}
    for r in range(a.rounds):
        for key, (call, _) in calls.items():
            times[key].append(mean_time(call, "cpu", 1))
        print(f"round {r + 1}/{a.rounds}", file=sys.stderr, flush=True)
    rate = {key: flops / statistics.median(times[key]) / peak for key, (_, flops) in calls.items()}
    probe_log = np.log([4.0 * k * n for k, n in GEMM_SIZES])

    def probes_at(size: float, m: int) -> float:  # the probes' rates this run, blended as gemm_curve blends
        return float(np.interp(math.log(size), probe_log, [rate[(f"probe {k}x{n}", m)] for k, n in GEMM_SIZES]))

    print(f"matmul rate, fraction of {peak / 1e9:.1f} GFLOP/s ({a.hardware}; {a.rounds} rounds, median): "
          "run / priced / x probes")
    print(f"{'matrix':28} {'k x n':>12} {'MiB':>6}  " + "  ".join(f"{f'M={m}':>20}" for m in rows))
    for s, (k, n) in shapes.items():
        size = 4.0 * k * n
        cells = [f"{rate[(s, m)]:.3f}/{row_efficiency(hw, size, m, (k, n)):.3f}/{rate[(s, m)] / probes_at(size, m):4.2f}"
                 for m in rows]
        print(f"{s:28} {f'{k}x{n}':>12} {size / 2**20:6.2f}  " + "  ".join(f"{c:>20}" for c in cells))


if __name__ == "__main__":
    main()
