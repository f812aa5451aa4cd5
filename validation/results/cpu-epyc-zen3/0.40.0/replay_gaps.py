"""The reuse probe's replay (validation/reuse.py) in variants, against the warm pool curves timed
in the same process (2026-12-05, 0.40.0). Run from the repository root with the project's
environment, alone (2 cores):

  python validation/results/cpu-epyc-zen3/0.40.0/replay_gaps.py ROWS VARIANTS [STEPS] [plain]

ROWS: comma-separated rows; VARIANTS: comma-separated BETWEEN:PASSGAP:VERIFY in seconds (host
work before each product of a forward, before each drafter pass, after the target's forward);
STEPS replayed steps per variant (default 40); `plain` leaves the allocator as Python has it
(default: engine.host_memory.retain_freed_memory, as the engine and compare run). Prints, per rows
and variant, the first pass's LM head and the later passes' layer and LM head over the warm
curves' price of the same products (validation.calibrate's pool probe: distinct matrices of the
shape filling 16 MiB, steady after WARM_GAP_S of host work), as gemm_reuse has them.
"""
from __future__ import annotations

import statistics as st
import sys
import time

import torch


def main(rows, variants, steps: int) -> None:
    from validation.calibrate import WARM_GAP_S, context_model
    from validation.probes import matmul_probes
    from validation.reuse import layer_shapes
    from validation.timing import host_gap, steady_time
    m = context_model("tiny")
    layer, h = layer_shapes(m), m.hidden
    lm_shape = (h, m.vocab)
    gap5 = host_gap(WARM_GAP_S)
    probes = matmul_probes("cpu", layer + [lm_shape], rows, 16 << 20, True)

    def warm(shapes, r):  # the warm curves' time of one product of each shape at r rows
        total = 0.0
        for k, n in shapes:
            fn, flops = probes[(k * n * 4 // 1024, r)]
            total += steady_time(fn, "cpu", between=gap5) * 2 * r * k * n / flops
        return total

    def mats(shapes):
        return [torch.randn(n, k).T for k, n in shapes]
    target, head, lm = mats(layer * m.layers), mats([(2 * h, h)] + layer), mats([lm_shape])[0]
    clock, other = time.perf_counter, host_gap(0.003)
    for r in rows:
        xs = {k: torch.randn(r, k) for k in {w.shape[0] for w in target + head + [lm]}}  # (r, k)
        w_layer, w_lm = warm(layer, r), warm([lm_shape], r)
        for between, passgap, verify in variants:
            bg, pg, vg = host_gap(between), host_gap(passgap), host_gap(verify)

            def prod(w):
                if between:
                    bg()
                t0 = clock()
                xs[w.shape[0]] @ w
                return clock() - t0
            got = {"first": [], "layer": [], "lm": []}
            for s in range(steps + 3):
                other()
                for w in target + [lm]:
                    prod(w)
                vg()
                for p in range(5):
                    pg()
                    xs[head[0].shape[0]] @ head[0]
                    a, b = sum(prod(w) for w in head[1:]), prod(lm)
                    if s >= 3:
                        if p == 0:
                            got["first"].append(b)
                        else:
                            got["layer"].append(a)
                            got["lm"].append(b)
            print(f"rows {r} between {between * 1e6:.0f}us passgap {passgap * 1e6:.0f}us verify {verify * 1e6:.0f}us: "
                  f"first {st.median(got['first']) / w_lm:.3f} later_layer {st.median(got['layer']) / w_layer:.3f} "
                  f"later_lm {st.median(got['lm']) / w_lm:.3f}", flush=True)


if __name__ == "__main__":
    torch.set_num_threads(1)
    a = sys.argv[1:]
    if "plain" not in a:
        from engine.host_memory import retain_freed_memory
        retain_freed_memory()
    main(tuple(int(x) for x in a[0].split(",")), [tuple(float(y) for y in v.split(":")) for v in a[1].split(",")],
         int(a[2]) if len(a) > 2 and a[2] != "plain" else 40)
