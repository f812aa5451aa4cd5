"""The engine's decode step by its batch on the calibration's 1-layer probe model: whether its
per-sequence host time is linear between 1 and 16 sequences, as seq_overhead_us takes it.

    python validation/results/cpu-epyc-zen4/0.51.0/seq_steps.py [ROUNDS]

Times validation.host_probes.engine_step (48 decode steps after a 16-token prompt, the engine's
own clock) at 1 to 16 sequences, the batches interleaved round by round, one thread, the
engine's allocator settings, and prints each batch's median step against the line through 1
and 16 (the calibration's seq_s and step_s)."""
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))
from engine.host_memory import retain_freed_memory  # noqa: E402
from validation.host_probes import engine_step  # noqa: E402

BATCHES = (1, 2, 3, 4, 6, 8, 12, 16)


def main(rounds: int = 7) -> None:
    torch.set_num_threads(1)
    retain_freed_memory()
    samples = {b: [] for b in BATCHES}
    for i in range(rounds):
        order = BATCHES if i % 2 == 0 else BATCHES[::-1]
        for b in order:
            samples[b].append(engine_step(b, "cpu"))
    t = {b: statistics.median(v) for b, v in samples.items()}
    per = (t[16] - t[1]) / 15
    print(f"median decode step over {rounds} rounds (us); line through 1 and 16: {per * 1e6:.1f} us a sequence")
    for b in BATCHES:
        line = t[1] + per * (b - 1)
        spread = (max(samples[b]) - min(samples[b])) / t[b]
        print(f"  {b:2d} sequences: {t[b] * 1e6:8.1f}  line {line * 1e6:8.1f}  ({(line / t[b] - 1) * 100:+5.1f}%)"
              f"  per sequence beyond 1: {(t[b] - t[1]) / max(b - 1, 1) * 1e6:6.1f}  spread {spread * 100:4.1f}%")


if __name__ == "__main__":
    main(*(int(x) for x in sys.argv[1:]))
