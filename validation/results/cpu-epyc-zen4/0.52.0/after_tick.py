"""How long the engine's steps stay slow after the calibration's probes: the family's `none` at
concurrency C, RUNS runs back to back right after a whole cycle of the probes (as a comparison
of `none` alone at two levels puts before each run), ROUNDS times.

    python validation/results/cpu-epyc-zen4/0.52.0/after_tick.py [ROUNDS] [RUNS] [C]

One thread, the engine's allocator settings, RUNS untimed runs first (with no probes before
them: the runs' own level). Prints each round's runs' median decode-step times (every sequence
decoding, no prefill), in order, and the seconds from the probes' end to each run's end."""
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))
from validation.calibrate import for_trace  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "0.51.0"))
from reference_ab import decode_median, family_engine  # noqa: E402


def main(rounds: int = 3, runs: int = 8, c: int = 4) -> None:
    trace, source, model, _ = family_engine()
    cal = for_trace(trace, source.spec)
    decode_median(trace, source, model, c, None)  # untimed
    base = [decode_median(trace, source, model, c, None)[0] for _ in range(runs)]
    print(f"before any probes: {' '.join(f'{x * 1e3:.2f}' for x in base)} ms (median {statistics.median(base) * 1e3:.2f})")
    for r in range(rounds):
        t0 = time.perf_counter()
        cal.round()
        t1 = time.perf_counter()
        got, ends = [], []
        for _ in range(runs):
            got.append(decode_median(trace, source, model, c, None)[0])
            ends.append(time.perf_counter() - t1)
        print(f"round {r + 1} (probes {t1 - t0:.0f} s): {' '.join(f'{x * 1e3:.2f}' for x in got)} ms; "
              f"ends {' '.join(f'{e:.1f}' for e in ends)} s", flush=True)


if __name__ == "__main__":
    main(*(int(x) for x in sys.argv[1:]))
