"""Whether the calibration's probes that validation.compare runs before each engine run slow the
run after them: the family's `none` at concurrency 1 and 4, runs right after another run
alternating with runs right after a share of the probes (as `compare --calibrate` spreads them:
Calibration.spread over the trace's 18 runs, 2 cycles).

    python validation/results/cpu-epyc-zen4/0.51.0/ticks_ab.py [PAIRS]

One thread, the engine's allocator settings, one untimed run first; prints each run's median
decode-step time (every sequence decoding, no prefill) and the medians of each way."""
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))
from validation.calibrate import for_trace  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from reference_ab import decode_median, family_engine  # noqa: E402


def main(pairs: int = 6) -> None:
    trace, source, model, _ = family_engine()
    tick = for_trace(trace, source.spec).spread(len(trace.speculation) * len(trace.sweep_concurrency), 2)
    for c in (1, 4):
        decode_median(trace, source, model, c, None)  # untimed
        ways: dict[str, list[float]] = {"after a run": [], "after probes": []}
        for i in range(pairs):
            for way in ways if i % 2 == 0 else reversed(list(ways)):
                if way == "after probes":
                    tick()
                ways[way].append(decode_median(trace, source, model, c, None)[0])
        for way, v in ways.items():
            print(f"concurrency {c} {way:12}: median {statistics.median(v) * 1e3:.3f} ms "
                  f"[{' '.join(f'{x * 1e3:.2f}' for x in v)}]")


if __name__ == "__main__":
    main(*(int(x) for x in sys.argv[1:]))
