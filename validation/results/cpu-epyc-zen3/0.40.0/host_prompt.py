"""Do the drafters' host figures grow with the probe's prompt? (2026-12-05, 0.40.0) The
calibration's drafter_host_probe (validation/drafter_host.py) runs 16-token prompts; the family's
are 128-176 tokens. Run from the repository root with the project's environment, alone:

  python validation/results/cpu-epyc-zen3/0.40.0/host_prompt.py PROMPT [CALLS]

Prints drafter_host_figures (us) of CALLS (default 2) probe calls at PROMPT-token prompts, amid
the family's memory traffic, with the allocator as the engine runs it.
"""
from __future__ import annotations

import sys

import torch


def main(prompt: int, calls: int) -> None:
    import validation.drafter_host as dh
    import validation.host_probes as hp
    from validation.calibrate import context_model
    from validation.traffic import Traffic
    traffic = Traffic.of(context_model("tiny"))
    steps = hp._decode_steps
    hp._decode_steps = lambda b, dev, e, tok, tr=None, _p=16, passes=False: steps(b, dev, e, tok, tr, prompt, passes)
    for _ in range(calls):
        t = dh.drafter_host_probe("cpu", traffic)
        print(prompt, {k: round(v * 1e6) for k, v in dh.drafter_host_figures(t).items()}, flush=True)


if __name__ == "__main__":
    torch.set_num_threads(1)
    from engine.host_memory import retain_freed_memory
    retain_freed_memory()
    main(int(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 2)
