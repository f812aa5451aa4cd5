"""The in-place layer's excess over its price at more sequence counts than the calibration's four:
CALLS calls of the in-situ probe's plain decoding runs (validation.reuse.insitu_probe's layer
timing, 128-token prompts as the family's traces) at 1, 2, 4, 8, 16, 32 and 64 sequences, each
row's median layer as timed less the cost model's price of all but its host time on PROFILE (a
measured profile; its launches set to 0), and the layer's products as timed (ProductClock) against
their price (the compute roof at gemm_step's factor, interpolated between its rows 1, 4, 16
and 64): where the layer's growth with the batch departs from the price's.

    python validation/results/cpu-epyc-zen4/0.53.0/layer_rows.py PROFILE [CALLS]

One thread. Prints each call's layer as timed by rows, then the medians, the price and the excess."""
import dataclasses
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))
from sim.cost import ForwardCost, Work  # noqa: E402
from sim.hardware import hardware_from_node  # noqa: E402
from sim.specio import Node  # noqa: E402
from validation.calibrate import context_model  # noqa: E402
from validation.reuse import insitu_probe  # noqa: E402

ROWS = (1, 2, 4, 8, 16, 32, 64)


def main(profile: str, calls: int = 3) -> None:
    torch.set_num_threads(1)
    spec = context_model("tiny")
    hw = hardware_from_node(Node(profile, None, "hardware"), Path("."))
    cost = ForwardCost(spec, dataclasses.replace(hw, launch_s=0.0).for_weights(spec.weight_bytes), layers=1, lm_head=False)
    probe = insitu_probe(spec, "cpu", ROWS, 20, 128)
    got = []
    for c in range(calls):
        t = probe()
        got.append(t)
        print(f"call {c + 1}: " + ", ".join(f"{r}: {t[f'reuseinplace{r}'] * 1e6:.0f} us" for r in ROWS), flush=True)
    for r in ROWS:
        timed = statistics.median(t[f"reuseinplace{r}"] for t in got)
        keys = statistics.median(t[f"reusekeys{r}"] for t in got)
        price = cost(Work(r, r, keys, keys, 0)).time
        products = statistics.median(t[f"reuselayers{r}"] for t in got) / spec.layers
        priced = cost._token_part(r, 0)[3]  # the products' compute roof (warm-priced: no weight bytes)
        print(f"{r:3d} sequences, {keys:6.0f} keys: layer {timed * 1e6:7.0f} us, priced but host {price * 1e6:7.0f} us, "
              f"excess {(timed - price) * 1e6:6.0f} us; products {products * 1e6:6.0f} us, priced {priced * 1e6:6.0f} us "
              f"({products / priced:.3f})")


if __name__ == "__main__":
    main(sys.argv[1], *(int(x) for x in sys.argv[2:]))
