"""Mixed passes at 4, 16 and 32 sequences, 0-100% of them verifying a 4-chain (the rest decoding),
after 160 tokens of context, on random weights of the family's shape: the engine's bare forward
against the simulator's price of it (validation.steptime's points, `drafting` sequences of the
batch verifying). Run from the repository root with the project's environment, alone:

  python validation/results/cpu-epyc-zen3/0.47.0/mixed_shares.py PROFILE [ROUNDS]
"""
from __future__ import annotations

import statistics
import sys
from dataclasses import replace
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT))
from engine.model import Model  # noqa: E402
from sim import trees as T  # noqa: E402
from sim.hardware import hardware_from_node  # noqa: E402
from sim.specio import Node  # noqa: E402
from validation.calibrate import context_model  # noqa: E402
from validation.steptime import bare_forward, point_call, work_of  # noqa: E402
from validation.timing import mean_time  # noqa: E402

CONTEXT, SHARES = 160, (0, 0.25, 0.5, 0.75, 1)


def main(profile: str, rounds: int) -> None:
    torch.set_num_threads(1)
    spec = replace(context_model("tiny"), bytes_per_weight=4.0, bytes_per_kv=4.0)
    hw = hardware_from_node(Node(profile, profile, "hardware"), ROOT)
    model = Model.random(spec, seed=0)
    points = [{"kind": "mixed4", "batch": b, "context": CONTEXT, "q": 1, "tree": T.chain(4), "drafting": round(b * s)}
              for b in (4, 16, 32) for s in SHARES]
    calls = [point_call(model, p, "cpu") for p in points]
    samples = [[] for _ in points]
    for r in range(rounds):  # alternately forwards and backwards, each sample at least 0.25 s of calls
        for i in (range(len(points)) if r % 2 == 0 else reversed(range(len(points)))):
            samples[i].append(mean_time(calls[i], "cpu", 5, min_s=0.25))
    for p, s in zip(points, samples):
        m, price = statistics.mean(s), bare_forward(spec, hw, work_of(p))
        print(f"B={p['batch']:2d} verifying {p['drafting']:2d}: engine {m * 1e3:7.3f} ms  price {price * 1e3:7.3f} ms"
              f"  ratio {price / m:.3f}")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 5)
