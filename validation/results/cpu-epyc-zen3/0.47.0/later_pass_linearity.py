"""Is a drafter's host work per sequence linear in the sequences up to 32? The calibration reads
it as a line through 1 and 16 (validation/drafter_host.py); the family's traces run 32. The
probes' own host times (EAGLE chains of 1 and 5, an MTP module's one pass) at 1, 8, 16 and 32
sequences, amid the family's memory traffic, ROUNDS rounds, medians. Run from the repository
root with the project's environment, alone:

  python validation/results/cpu-epyc-zen3/0.47.0/later_pass_linearity.py [ROUNDS]
"""
from __future__ import annotations

import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))
from validation.calibrate import context_model  # noqa: E402
from validation.drafter_host import _host_time  # noqa: E402
from validation.traffic import Traffic  # noqa: E402

SEQS = (1, 8, 16, 32)


def main(rounds: int) -> None:
    torch.set_num_threads(1)
    traffic = Traffic.of(context_model("tiny"), "cpu")
    entries = {1: {"scheme": "eagle", "depth": 1}, 5: {"scheme": "eagle", "depth": 5}, "mtp": {"scheme": "mtp", "depth": 1}}
    times: dict = {}
    for _ in range(rounds):
        for key, entry in entries.items():
            for b in SEQS:
                times.setdefault((key, b), []).append(_host_time(b, entry, "cpu", traffic, None, 16))
    med = {k: statistics.median(v) for k, v in times.items()}
    print("host work a step, median (ms):")
    for key in entries:
        print(f"  {str(key):>3}: " + "  ".join(f"{b} seqs {med[(key, b)] * 1e3:6.3f}" for b in SEQS))
    print("per sequence between batch sizes (us): a later pass's ((chain 5 - chain 1) / 4), a first pass's (MTP)")
    for a, b in zip(SEQS, SEQS[1:]):
        later = ((med[(5, b)] - med[(5, a)]) - (med[(1, b)] - med[(1, a)])) / (b - a) / 4
        first = (med[("mtp", b)] - med[("mtp", a)]) / (b - a)
        print(f"  {a:2d} -> {b:2d}: later {later * 1e6:6.2f}   first {first * 1e6:6.2f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 15)
