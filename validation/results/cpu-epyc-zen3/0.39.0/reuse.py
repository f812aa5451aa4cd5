"""Does a probe that replays a speculative step's order of products reproduce what the drafters'
products cost in the engine? (2026-12-05, 0.39.0). Run from the repository root with the project's
environment, alone (2 cores):

  python validation/results/cpu-epyc-zen3/0.39.0/reuse.py SECONDS [PASSES [ROWS [VERIFY_MS]]]

Random matrices of the family's shapes: the target's 17 (four layers and the LM head, 16 MiB) and
an EAGLE head's (its 2h -> h projection and one layer; the LM head is the target's). A step, again
and again: 3 ms of host work (the step's other work), the target's products at one row, 0.5 ms of
host work (verification and the drafter's set-up; VERIFY_MS, default 0.5), then PASSES (default 5)
drafter passes at ROWS rows (default 1; the target's products at as many), each its projection, its layer's four products and the shared LM head, 0.2 ms of host work
before each (the pass's packing). The layer's products and the LM head are timed (the engine's
`mm` and `lm` in drafter_parts.py; the projection runs outside the forward there). Medians over
the steps: the first pass's layer products and LM head, the later passes' (each pass), and the
calibration's warm probe of the same (steady after 5 ms of host work, every 20 steps) beside them; and the ratios, to set
beside drafter_parts.txt (EAGLE at 1: layer products 0.226 ms a pass, LM head 0.192 ms a pass, in
the engine; MTP modules' LM head 0.208 ms).
"""
from __future__ import annotations

import statistics as st
import sys
import time

import torch

TARGET = [(256, 512), (256, 256), (256, 1536), (768, 256)] * 4  # (k, n) of x @ W.T, a layer's four
LM = (256, 4096)
HEAD = [(512, 256), (256, 512), (256, 256), (256, 1536), (768, 256)]  # projection, then the layer's four


def main(seconds: float, passes: int, rows: int = 1, verify_ms: float = 0.5) -> None:
    from validation.timing import host_gap, steady_time
    mats = lambda shapes: [torch.randn(n, k).T for k, n in shapes]  # noqa: E731  W.T (k, n)
    target, head, lm = mats(TARGET), mats(HEAD), mats([LM])[0]
    xs = {k: torch.randn(rows, k) for k, _ in TARGET + HEAD + [LM]}  # (rows, k)
    other, verify, pack = host_gap(0.003), host_gap(verify_ms / 1e3), host_gap(0.0002)
    clock = time.perf_counter

    def timed(w) -> float:
        t0 = clock()
        xs[w.shape[0]] @ w
        return clock() - t0

    gap = host_gap(0.005)
    layer_mats = head[1:]  # the engine's `mm`: the layer's products inside the forward (the projection is outside)
    first_layer, first_lm, later_layer, later_lm, warm_layer, warm_lm = [], [], [], [], [], []
    end = time.time() + seconds
    steps = 0
    while time.time() < end:
        if steps % 20 == 0:  # the warm probe beside, every 20 steps
            warm_layer.append(steady_time(lambda: [xs[w.shape[0]] @ w for w in layer_mats], "cpu", between=gap))
            warm_lm.append(steady_time(lambda: xs[LM[0]] @ lm, "cpu", between=gap))
        steps += 1
        other()
        for w in target + [lm]:
            xs[w.shape[0]] @ w
        verify()
        for p in range(passes):
            pack()
            xs[head[0].shape[0]] @ head[0]  # the projection
            layer = sum(timed(w) for w in layer_mats)
            head_lm = timed(lm)
            (first_layer if p == 0 else later_layer).append(layer)
            (first_lm if p == 0 else later_lm).append(head_lm)
    warm_layer, warm_lm = st.median(warm_layer), st.median(warm_lm)
    print(f"{len(first_lm)} steps, {seconds:.0f} s, {passes} drafter passes a step at {rows} rows, {verify_ms} ms before "
          "the first; us, median over steps (over warm)")
    for name, v, w in (("first pass: layer", first_layer, warm_layer), ("first pass: LM head", first_lm, warm_lm),
                       ("later passes: layer", later_layer, warm_layer), ("later passes: LM head", later_lm, warm_lm)):
        print(f"  {name:24} {st.median(v) * 1e6:7.1f} ({st.median(v) / w:.2f})")
    print(f"  warm probe (median of {len(first_lm) // 20 + 1}): layer {warm_layer * 1e6:.1f}, LM head {warm_lm * 1e6:.1f}")


if __name__ == "__main__":
    torch.set_num_threads(1)
    a = sys.argv[1:]
    main(float(a[0]), int(a[1]) if len(a) > 1 else 5, int(a[2]) if len(a) > 2 else 1, float(a[3]) if len(a) > 3 else 0.5)
