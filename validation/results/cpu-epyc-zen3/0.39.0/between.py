"""Does other work between a walk's products slow them as a forward's other work does? (2026-12-05,
0.39.0). Run from the repository root with the project's environment, alone (2 cores):

  python validation/results/cpu-epyc-zen3/0.39.0/between.py SECONDS LABEL CONCURRENCY

As walk.py (the target's products timed inside LABEL's forwards at CONCURRENCY, then the same
matrices walked in the forward's order, steady after 5 ms of host work), the walk four ways:
alone (`walk`); with a SiLU over a (CONCURRENCY, 256) tensor before each product (`walk-small`:
an elementwise pass of the step's activations); with an add over 1 MiB before each product
(`walk-1MiB`: memory traffic between the products, as the attention's K and V reads); with a
product and sum over a (8 x CONCURRENCY, 256) tensor (`walk-mid`); and alone under
torch.inference_mode (`walk-inference`, as the engine's forward runs). Medians over cycles of
each reading and its ratio to in situ, and by place in the forward.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import walk as W  # noqa: E402  (it puts 0.35.0 and 0.36.0 on the path)


def main(seconds: float, label: str, conc: int) -> None:
    from validation.timing import host_gap
    setup = W.InSitu(label, conc)
    gap = host_gap(0.005)
    small, big, mid = torch.randn(conc, 256), torch.randn(1 << 18), torch.randn(conc * 8, 256)  # big: 1 MiB
    befores = {"walk": None, "walk-small": lambda: torch.nn.functional.silu(small),
               "walk-1MiB": lambda: big.add_(0.0), "walk-mid": lambda: (mid * 1.0).sum()}
    pairs, runs = None, []
    end = time.time() + seconds
    while time.time() < end:
        insitu, _, _ = setup.run()
        if pairs is None:
            pairs = [(torch.randn(r, m.shape[0]), m) for m, r in zip(setup.mats, setup.sig)]  # x (rows, k), W.T (k, n)
        cyc = {"insitu": insitu}  # (places,)
        for name, before in befores.items():
            cyc[name] = np.array(W.walk_times(pairs, setup.inner, gap, before))
        with torch.inference_mode():
            cyc["walk-inference"] = np.array(W.walk_times(pairs, setup.inner, gap))
        runs.append(cyc)
        print("  " + ", ".join(f"{k} {v.sum() * 1e3:.3f}" for k, v in cyc.items()), flush=True)
    base = np.array([r["insitu"].sum() for r in runs])
    print(f"{len(runs)} cycles {label} at {conc}, rows {setup.sig}")
    for k in runs[0]:
        v = np.array([r[k].sum() for r in runs])
        print(f"  {k:15} {np.median(v) * 1e3:.3f} {np.median(v / base):.3f}")
        if k != "insitu":
            by = np.median(np.array([r[k] / r["insitu"] for r in runs]), axis=0)
            print("     by place " + " ".join(f"{b:.2f}" for b in by))


if __name__ == "__main__":
    torch.set_num_threads(1)
    main(float(sys.argv[1]), sys.argv[2], int(sys.argv[3]))
