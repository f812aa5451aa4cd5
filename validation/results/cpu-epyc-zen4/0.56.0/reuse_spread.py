"""How far the in-situ product factors (gemm_reuse, gemm_step; validation.reuse) move round to
round, and whether pairing each in-situ call with the warm curves' probes timed right beside it
steadies them: per round, the in-situ probe (rows 1 and 4, the family's shape, the trace's
median prompt) then the warm shape probes of the same matrices (steady_time after host_gap, as
the calibration runs them). Prints each round's factors, then the factor three ways: the
calibration's (mean in-situ over mean warm), the mean and the median of the per-round ratios.

python validation/results/cpu-epyc-zen4/0.56.0/reuse_spread.py ROUNDS [ROWS, e.g. 1,4]"""
import statistics
import sys
import time

import torch

from engine.host_memory import retain_freed_memory
from sim.spec import load_trace
from validation.calibrate import WARM_GAP_S
from validation.probes import last_level_cache_bytes, matmul_probes
from validation.reuse import insitu_figures, insitu_probe, layer_shapes, probe_prompt
from validation.timing import host_gap, steady_time
from sim.models import model_from_node
from sim.specio import Node
from pathlib import Path

torch.set_num_threads(1)
retain_freed_memory()
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 8
trace = load_trace("traces/family-schemes.yaml")
spec = model_from_node(Node("tiny", "script", "model"), Path("."))
rows = tuple(int(x) for x in sys.argv[2].split(",")) if len(sys.argv) > 2 else (1, 4)
prompt = probe_prompt(trace)
probe = insitu_probe(spec, "cpu", rows, 20, prompt)
shapes = sorted(set(layer_shapes(spec)) | {(spec.hidden, spec.vocab)})
pool = min(64 << 20, last_level_cache_bytes() // 2)
warm = {(k, n, m): c for k, n in shapes for (_, m), c in matmul_probes("cpu", [(k, n)], rows, pool, True).items()}
gap = host_gap(WARM_GAP_S)
print(f"# prompt {prompt}, shapes {shapes}, pool {pool >> 20} MiB, rounds {rounds}", flush=True)


def table(w):  # the warm curves as fractions of a peak of 1 FLOP/s (it cancels in the factors)
    out = {}
    for (k, n, m), (_, flops) in warm.items():
        out.setdefault(f"{k}x{n}", []).append([m, flops / w[(k, n, m)]])
    return out


def cols(f):
    return {name: {row[0]: row[1:] for row in f[name]} for name in ("gemm_reuse", "gemm_step")}


probe(); [steady_time(fn, "cpu", between=gap) for fn, _ in warm.values()]  # warm-up
ins, wms, per = [], [], []
t0 = time.time()
for i in range(rounds):
    t = probe()
    w = {key: steady_time(fn, "cpu", between=gap) for key, (fn, _) in warm.items()}
    f = cols(insitu_figures(t, spec, table(w), 1.0, rows))
    ins.append(t), wms.append(w), per.append(f)
    print(f"round {i + 1} ({time.time() - t0:.0f} s): reuse {f['gemm_reuse']} step {f['gemm_step']}", flush=True)
    print("   in-situ us: " + " ".join(f"{k}={v * 1e6:.0f}" for k, v in t.items() if k.startswith("reuse") and "keys" not in k),
          "| warm us: " + " ".join(f"{k}x{n}@{m}={v * 1e6:.0f}" for (k, n, m), v in w.items()), flush=True)

mean_t = {k: statistics.mean(x[k] for x in ins) for k in ins[0]}
mean_w = {k: statistics.mean(x[k] for x in wms) for k in wms[0]}
cal = cols(insitu_figures(mean_t, spec, table(mean_w), 1.0, rows))
for name in ("gemm_reuse", "gemm_step"):
    for r in rows:
        ratios = list(zip(*(p[name][r] for p in per)))
        print(f"{name} at {r}: calibration's " + " ".join(f"{v:.3f}" for v in cal[name][r])
              + " | per-round mean " + " ".join(f"{statistics.mean(c):.3f}" for c in ratios)
              + " median " + " ".join(f"{statistics.median(c):.3f}" for c in ratios)
              + " | per-round range " + " ".join(f"{min(c):.2f}-{max(c):.2f}" for c in ratios))
# each part's spread round to round, in-situ and warm alone (coefficient of variation)
print("in-situ cv: " + " ".join(f"{k}={statistics.stdev(x[k] for x in ins) / mean_t[k]:.3f}" for k in mean_t if "keys" not in k))
print("warm cv: " + " ".join(f"{k}x{n}@{m}={statistics.stdev(x[(k, n, m)] for x in wms) / mean_w[(k, n, m)]:.3f}" for k, n, m in mean_w))
