"""Whether subnormal floats slow the engine's trained target where the calibration's random-weight
probes have none: the family's `none` at concurrency C, runs alternating with the CPU flushing
subnormals to zero (torch.set_flush_denormal(True)) and without (the default), order swapped
pair to pair.

    python validation/results/cpu-epyc-zen4/0.52.0/denormal_ab.py [C] [PAIRS]

One thread, the engine's allocator settings, one untimed run first. Prints each way's median of
the runs' median decode steps (every sequence decoding, no prefill) and the pairs' ratios."""
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "0.51.0"))
from reference_ab import decode_median, family_engine  # noqa: E402


def main(c: int = 1, pairs: int = 8) -> None:
    trace, source, model, _ = family_engine()
    decode_median(trace, source, model, c, None)  # untimed
    ways: dict[bool, list[float]] = {True: [], False: []}
    for i in range(pairs):
        for flush in ((True, False) if i % 2 == 0 else (False, True)):
            torch.set_flush_denormal(flush)
            ways[flush].append(decode_median(trace, source, model, c, None)[0])
    torch.set_flush_denormal(False)
    ratios = sorted(a / b for a, b in zip(ways[True], ways[False]))
    print(f"concurrency {c}, {pairs} pairs: median decode step flushing subnormals "
          f"{statistics.median(ways[True]) * 1e3:.3f} ms, not {statistics.median(ways[False]) * 1e3:.3f} ms; "
          f"flushing over not, pair by pair: median {statistics.median(ratios):.3f} [{' '.join(f'{r:.2f}' for r in ratios)}]")


if __name__ == "__main__":
    main(*(int(x) for x in sys.argv[1:]))
