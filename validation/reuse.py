"""The calibration's probe of weights used again within a speculative step (validation/calibrate.py).

The warm matmul curves (gemm_shapes_warm) time a pass over a model's matrices that wait
WARM_GAP_S of host work between passes: the target's matrices, used once a step. A drafter's
passes run soon after the target's and after each other: an EAGLE head's and MTP module's LM
head is the target's own, used again right after the target's forward, and a head's own layer
(a draft model's layers) is used again by every pass after a step's first. On a 2-core EPYC VM
(32 MB L3) those products ran 0.4-0.8x what the warm curves charge at 1-4 rows, and a replay of
the step's order of products reproduced the engine's times where fixed gaps did not
(validation/results/cpu-epyc-zen3/0.39.0/reuse.txt, drafter_parts.txt).

`reuse_probe` replays that order with random matrices of the target's shapes, at each of
`rows`: host work (a step's other work), the target's layers and LM head, host work (its
verification, the drafter's set-up), then REUSE_PASSES drafter passes, each after a pass's
packing: a 2h -> h projection, one layer of the target's shapes and the LM head; every product of
a forward after a layer's host work per product (its norms, rotary, attention and their calls
run between the products in the engine). Without that work between the products the replay read
the products 10-25% faster than with it at 4 and 16 rows (0.875 / 0.74 / 0.58 against 1.02 /
0.89 / 0.73 at 4 rows, on the three parts below; with the allocator as the engine runs it,
engine.host_memory), where the family's engine read 0.96 / 0.84 / 0.69 in the same hour. It times the
first pass's LM head and the later passes' layer and LM head; `reuse_figures` divides each by the
warm curves' price of the same products: `gemm_reuse` rows of the profile,
[rows, first pass's shared LM head, later passes' layer, later passes' LM head]
(sim.hardware.HardwareSpec.gemm_reuse). It times the target's products too, which the warm
curves price timed back to back in a pool of one shape: `gemm_step` rows, [rows, the target's
layers' products, its LM head's], each over the warm curves' price (HardwareSpec.gemm_step,
since 0.41.0), a factor on every product those curves price (sim.cost.step_factor).
"""
from __future__ import annotations

import statistics
import time

import numpy as np
import torch

from sim.cost import REUSE_PARTS, STEP_PARTS, weight_shapes
from sim.models import ModelSpec
from validation.timing import host_gap

REUSE_ROWS = (1, 4, 16, 64)  # a drafter pass's rows: one per sequence, up to a tree level's
REUSE_PASSES = 5  # drafter passes a replayed step (EAGLE's depth 5)
REUSE_STEPS = 30  # replayed steps a call, at each rows, after REUSE_SKIP untimed ones
REUSE_SKIP = 3
# host work between the step's parts, seconds: the step's other work before the target's forward,
# its verification and the drafter's set-up after it, each drafter pass's packing (the family's
# engine steps at one sequence, 0.39.0's drafter_parts.txt)
REUSE_GAPS = (0.003, 0.0005, 0.0002)
# host work before each product of a forward: a family-shaped layer's host time beyond its
# products over its four products (this CPU's calibrations: 650-780 us a layer, `launch_us` x
# KERNELS_PER_LAYER)
REUSE_PRODUCT_GAP = 0.00016


def layer_shapes(m: ModelSpec) -> list[tuple[int, int]]:
    """(k, n) of one dense layer's matrices in the order a forward multiplies by them."""
    attn, ffn, _ = weight_shapes(m, 1)
    return [(int(k), int(n)) for k, n in attn + ffn]


def reuse_probe(model: ModelSpec, device: str, rows=REUSE_ROWS, steps: int = REUSE_STEPS):
    """The replay's call: {f"reuse{part}{r}": median seconds over `steps` replayed steps} for
    each of `rows` and each of sim.cost.REUSE_PARTS (the later passes' per pass) and
    sim.cost.STEP_PARTS (the target's layers, all of them, and its LM head)."""
    layer, h = layer_shapes(model), model.hidden
    lm_shape = (h, model.vocab)

    def mats(shapes):  # W.T (k, n) of each (k, n), as the engine's x @ W.T reads W (n, k)
        return [torch.randn(n, k, device=device).T for k, n in shapes]
    target = mats(layer * model.layers)
    head = mats([(2 * h, h)] + layer)
    lm = mats([lm_shape])[0]
    other, verify, pack = (host_gap(s) for s in REUSE_GAPS)
    between = host_gap(REUSE_PRODUCT_GAP)
    clock = time.perf_counter
    ks = {w.shape[0] for w in target + head + [lm]}
    inputs = {r: {k: torch.randn(r, k, device=device) for k in ks} for r in rows}  # rows -> k -> x (r, k)

    def call():
        out = {}
        for r in rows:
            xs = inputs[r]

            def timed(w):
                between()
                t0 = clock()
                xs[w.shape[0]] @ w
                return clock() - t0
            got = {p: [] for p in REUSE_PARTS + STEP_PARTS}
            for s in range(REUSE_SKIP + steps):
                other()
                layers_s = sum(timed(w) for w in target)
                target_lm_s = timed(lm)
                if s >= REUSE_SKIP:
                    got["layers"].append(layers_s)
                    got["lm"].append(target_lm_s)
                verify()
                for p in range(REUSE_PASSES):
                    pack()
                    xs[head[0].shape[0]] @ head[0]  # the projection
                    layer_s = sum(timed(w) for w in head[1:])
                    lm_s = timed(lm)
                    if s >= REUSE_SKIP:
                        if p == 0:
                            got["first"].append(lm_s)
                        else:
                            got["later_layer"].append(layer_s)
                            got["later_lm"].append(lm_s)
            out |= {f"reuse{p}{r}": statistics.median(v) for p, v in got.items()}  # STEP_PARTS' too
        return out
    return call


def reuse_figures(t: dict, model: ModelSpec, shapes_warm: dict, peak: float, rows=REUSE_ROWS) -> tuple[list, list]:
    """(gemm_reuse's rows, gemm_step's rows) from reuse_probe's times `t` and the profile's warm
    shape curves (`shapes_warm`: {"KxN": [[rows, fraction of `peak`], ...]}): each part over the
    warm curves' price of its products at those rows. A rows value without the curves it needs
    is left out."""
    layer, h = layer_shapes(model), model.hidden

    def warm(shapes, r):
        total = 0.0
        for k, n in shapes:
            curve = shapes_warm.get(f"{k}x{n}")
            if not curve:
                return None
            at, frac = np.array(curve, dtype=float).T
            total += 2.0 * k * n * r / (float(np.interp(r, at, frac)) * peak)
        return total

    reuse, step = [], []
    for r in rows:
        lm_s, layer_s = warm([(h, model.vocab)], r), warm(layer, r)
        if lm_s is None or layer_s is None or f"reusefirst{r}" not in t:
            continue
        # the parts' products at the warm price
        price = {"first": lm_s, "later_layer": layer_s, "later_lm": lm_s, "layers": layer_s * model.layers, "lm": lm_s}
        reuse.append([r] + [round(t[f"reuse{p}{r}"] / price[p], 4) for p in REUSE_PARTS])
        if f"reuselayers{r}" in t:
            step.append([r] + [round(t[f"reuse{p}{r}"] / price[p], 4) for p in STEP_PARTS])
    return reuse, step
