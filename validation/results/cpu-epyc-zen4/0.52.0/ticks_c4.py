"""Whether a share of the calibration's probes right before a run slows it, at concurrency C:
the family's `none`, runs right after a share of the probes (as `compare --calibrate` spreads
them over INTERVALS runs a trace, 2 cycles) alternating with runs right after another run
(order swapped pair to pair).

    python validation/results/cpu-epyc-zen4/0.52.0/ticks_c4.py [C] [PAIRS] [INTERVALS]

0.51.0's ticks_ab.py at 1 and 4 with 6 pairs; this one pairs more runs at one level. One
thread, the engine's allocator settings, one untimed run first; prints each way's median of the
runs' median decode steps (every sequence decoding, no prefill) and the pairs' ratios sorted."""
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))
from validation.calibrate import for_trace  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "0.51.0"))
from reference_ab import decode_median, family_engine  # noqa: E402


def main(c: int = 4, pairs: int = 16, intervals: int = 18) -> None:
    trace, source, model, _ = family_engine()
    tick = for_trace(trace, source.spec).spread(intervals, 2)
    decode_median(trace, source, model, c, None)  # untimed
    ways: dict[str, list[float]] = {"after probes": [], "after a run": []}
    for i in range(pairs):
        for way in (list(ways) if i % 2 == 0 else list(ways)[::-1]):
            if way == "after probes":
                tick()
            ways[way].append(decode_median(trace, source, model, c, None)[0])
    ratios = sorted(a / b for a, b in zip(ways["after probes"], ways["after a run"]))
    print(f"concurrency {c}, {pairs} pairs, probes spread over {intervals} runs: median decode step after probes "
          f"{statistics.median(ways['after probes']) * 1e3:.3f} ms, after a run {statistics.median(ways['after a run']) * 1e3:.3f} ms; "
          f"after probes over after a run, pair by pair: median {statistics.median(ratios):.3f} "
          f"[{' '.join(f'{r:.2f}' for r in ratios)}]")


if __name__ == "__main__":
    main(*(int(x) for x in sys.argv[1:]))
