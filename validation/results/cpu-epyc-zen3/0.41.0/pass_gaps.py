"""The calibration's replay (validation/reuse.py) with other host work between its drafter passes
and before the first, against the warm pool curves timed in the same process (2026-12-05, 0.41.0).
Run from the repository root with the project's environment, alone (2 cores):

  python validation/results/cpu-epyc-zen3/0.41.0/pass_gaps.py ROWS VERIFY:PASSGAP[:MIB],... [STEPS] [engine]

ROWS: comma-separated rows; each variant sets the replay's REUSE_GAPS to (3 ms, VERIFY, PASSGAP)
seconds (the step's other work, the host work after the target's forward, before each drafter
pass); MIB, where given: those two gaps also read that many MiB of a buffer of their own first
(memory traffic as a pass's KV gather, logits and sampling make, which host_gap's does not). Prints, per variant, gemm_reuse's and gemm_step's rows as the calibration computes them
(validation.reuse.reuse_figures over the calibration's warm pool probes: distinct matrices of the
shape filling 16 MiB, steady after WARM_GAP_S of host work), and each reuse part over the step
factor of its kind: what the cost model charges a reused product against the target's own.
`engine`: the allocator as the engine and the calibration run it (engine.host_memory); default
Python's own.
"""
from __future__ import annotations

import sys

import torch


def main(rows, variants, steps: int) -> None:
    from sim.cost import REUSE_PARTS, STEP_OF, STEP_PARTS
    from validation import reuse
    from validation.calibrate import WARM_GAP_S, context_model
    from validation.probes import matmul_probes
    from validation.timing import host_gap, steady_time
    m = context_model("tiny")
    shapes = sorted(set(reuse.layer_shapes(m)) | {(m.hidden, m.vocab)})
    gap = host_gap(WARM_GAP_S)
    probes = matmul_probes("cpu", shapes, rows, 16 << 20, True)
    curves = {f"{k}x{n}": [[r, probes[(k * n * 4 // 1024, r)][1] / steady_time(probes[(k * n * 4 // 1024, r)][0], "cpu", between=gap)]
                           for r in rows] for k, n in shapes}  # FLOP/s at each rows: fractions of a peak of 1
    plain_gap = reuse.host_gap
    for verify, passgap, *mib in variants:
        reuse.REUSE_GAPS = (0.003, verify, passgap)
        swept = torch.randn(int(mib[0] * (1 << 20)) // 4) if mib and mib[0] else None  # (MiB / 4 bytes,)

        def gap(seconds, _plain=plain_gap, _swept=swept, _at=(verify, passgap)):
            inner = _plain(seconds)
            if _swept is None or seconds not in _at:
                return inner
            return lambda: (_swept.sum(), inner())
        reuse.host_gap = gap
        t = reuse.reuse_probe(m, "cpu", rows, steps)()
        got, step = reuse.reuse_figures(t, m, curves, 1.0, rows)
        for g, s in zip(got, step):
            over = {p: g[1 + i] / s[1 + STEP_PARTS.index(STEP_OF[p])] for i, p in enumerate(REUSE_PARTS)}
            print(f"rows {g[0]:3} verify {verify * 1e6:5.0f}us passgap {passgap * 1e6:5.0f}us "
                  f"swept {mib[0] if mib else 0:g} MiB: reuse "
                  + " ".join(f"{p} {x:.3f}" for p, x in zip(REUSE_PARTS, g[1:])) + "; step "
                  + " ".join(f"{p} {x:.3f}" for p, x in zip(STEP_PARTS, s[1:])) + "; reuse over step "
                  + " ".join(f"{p} {x:.3f}" for p, x in over.items()), flush=True)


if __name__ == "__main__":
    torch.set_num_threads(1)
    if "engine" in sys.argv[4:]:
        from engine.host_memory import retain_freed_memory
        retain_freed_memory()
    main([int(x) for x in sys.argv[1].split(",")],
         [tuple(float(v) for v in x.split(":")) for x in sys.argv[2].split(",")],
         int(sys.argv[3]) if len(sys.argv) > 3 else 30)
