"""The fused-attention fit's calls, and chains of the step-time grid's shapes priced by it.

    python validation/results/cpu-epyc-zen3/0.49.0/fused_extrapolation.py [ROUNDS] [--short]

Times validation.probes.ATTN_CALLS as the calibration does (interleaved, the engine's allocator
settings, one thread), fits them (validation.probes.attention_figures' parts: a fixed part, per
query head, per key and query head, per product), and prints each call's time against the fit;
then the same for calls the fit did not see, the grid's family chains (1, 4 and 16 sequences
verifying 4 tokens after 512 and 2,048 keys), priced by the same parts. The per-key part beyond
the gather is what the profile's fused_key_ns holds. --short: the fit also sees SHORT_CHAINS,
chains of 2 to 4 tokens (MTP's and EAGLE's chains are 2 to 7) at other shapes than the grid's."""
import statistics
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))
from engine.host_memory import retain_freed_memory  # noqa: E402
from validation.probes import ATTN_CALLS, ATTN_HEADS, KV_DIM, attention_probe, fit_parts  # noqa: E402
from validation.timing import interleaved_times  # noqa: E402

GRID_CHAINS = ((1, 4, 512, True), (4, 4, 512, True), (16, 4, 512, True), (1, 4, 2048, True), (4, 4, 2048, True),
               (16, 4, 2048, True))

SHORT_CHAINS = ((16, 2, 128, True), (4, 3, 1024, True), (1, 4, 1024, True), (16, 4, 1024, True))


def row(s, q, c):
    keys = c + q
    return [1.0, ATTN_HEADS * s * q, ATTN_HEADS * s * keys, 4 * ATTN_HEADS * KV_DIM * s * q * keys]


def main(rounds: int = 5, short: bool = False) -> None:
    torch.set_num_threads(1)
    retain_freed_memory()
    fitted = list(ATTN_CALLS) + (list(SHORT_CHAINS) if short else [])
    calls = fitted + list(GRID_CHAINS)
    fns = {a: attention_probe("cpu", *a) for a in calls}
    samples = {a: [] for a in calls}
    for _ in range(rounds):
        for a, t in interleaved_times(fns, "cpu", 3).items():
            samples[a].append(t)
    t = {a: statistics.mean(v) for a, v in samples.items()}
    rows = np.array([row(*a[:3]) for a in fitted])
    coef = fit_parts(rows, np.array([t[a] for a in fitted]))
    print(f"fit: fixed {coef[0] * 1e3:.3f} ms, per query head {coef[1] * 1e6:.3f} us, per key and query head "
          f"{coef[2] * 1e9:.2f} ns, per product {coef[3] * 1e12:.3f} ps ({1 / max(coef[3], 1e-18) / 1e9:.1f} GFLOP/s)")
    for a in calls:
        p = float(np.array(row(*a[:3])) @ coef)
        tag = "fitted" if a in fitted else "grid  "
        print(f"{tag} {a[0]:2d} seqs x {a[1]:3d} queries after {a[2]:5d} keys ({'chain' if a[3] else 'prefill'}): "
              f"{t[a] * 1e3:7.3f} ms, fit {p * 1e3:7.3f} ms ({100 * (p / t[a] - 1):+6.1f}%)")


if __name__ == "__main__":
    main(*(int(x) for x in sys.argv[1:] if x != "--short"), short="--short" in sys.argv)
