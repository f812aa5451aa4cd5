"""The engine's products timed in place (0.42.0's validation.reuse.insitu_probe) against 0.41.0's
replay of a step's order of products (validation/reuse.py at 0.41.0, read from git), in one
process, call by call alternately (2026-12-05). Run from the repository root of a git checkout
with the project's environment, alone (2 cores):

  python validation/results/cpu-epyc-zen3/0.42.0/insitu.py PROFILE [ROUNDS] [ROWS] [PROMPT]

PROFILE: a measured profile of this hour (its warm shape curves and peak price the parts);
ROUNDS calls of each (default 3); ROWS (default 1,4,16,64); PROMPT, the in-situ probe's prompt
tokens (default 128, the family traces'; the replay has none). Prints each part's mean time over
the calls, in place and replayed at the same rows (the target's parts: the replay's at r rows;
in place, plain decoding at r rows and, marked verify, the target after the drafter's passes at
6 r), and both probes' profile rows (insitu_figures, and 0.41.0's reuse_figures).
"""
from __future__ import annotations

import subprocess
import sys
import types

import numpy as np
import torch
import yaml

REPLAY_COMMIT = "dd42a83"  # 0.41.0's last commit


def replay_module():
    src = subprocess.run(["git", "show", f"{REPLAY_COMMIT}:validation/reuse.py"], check=True, capture_output=True,
                         text=True).stdout
    mod = types.ModuleType("reuse_041")
    exec(compile(src, "reuse_041.py", "exec"), mod.__dict__)
    return mod


def main(profile: str, rounds: int, rows: tuple, prompt: int) -> None:
    from engine.host_memory import retain_freed_memory
    from validation.calibrate import context_model
    from validation.reuse import insitu_figures, insitu_probe
    retain_freed_memory()  # as the engine and the calibration run
    old = replay_module()
    m = context_model("tiny")
    prof = yaml.safe_load(open(profile))
    peak = prof["tflops"]["fp32"] * 1e12
    ins, rep = insitu_probe(m, "cpu", rows, prompt=prompt), old.reuse_probe(m, "cpu", rows)
    a, b = [], []
    for _ in range(rounds):
        a.append(ins())
        b.append(rep())
    mean = lambda calls: {k: float(np.mean([c[k] for c in calls])) for k in calls[0]}  # noqa: E731
    ta, tb = mean(a), mean(b)
    print(f"{rounds} calls each, alternately; the family's shape; in place after {prompt}-token prompts; profile {profile}")
    print(f"{'part':22}{'in place us':>14}{'replay us':>12}{'ratio':>8}")
    for k in sorted(ta):
        other = tb.get(k)
        print(f"{k:22}{ta[k] * 1e6:14.0f}" + (f"{other * 1e6:12.0f}{ta[k] / other:8.2f}" if other else ""))
    print("in place:", insitu_figures(ta, m, prof["gemm_shapes_warm"], peak, rows))
    r, s = old.reuse_figures(tb, m, prof["gemm_shapes_warm"], peak, rows)
    print("replay:  ", {"gemm_reuse": r, "gemm_step": s})


if __name__ == "__main__":
    torch.set_num_threads(1)
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 3,
         tuple(int(x) for x in (sys.argv[3] if len(sys.argv) > 3 else "1,4,16,64").split(",")),
         int(sys.argv[4]) if len(sys.argv) > 4 else 128)
