"""Whether a comparison's context (a share of the calibration's probes before each run, the
host-speed reference after every step) changes how the engine's plain decode step grows from 1
to 4 sequences: the family's `none` at 1 then 4 (as `compare`'s scheme_major runs take a
scheme's levels), runs alternating between the comparison's context and none (each pair's order
swapped from pair to pair).

    python validation/results/cpu-epyc-zen4/0.52.0/context_ab.py [PAIRS] [CYCLES]

The probes before each run are the calibration's for the family (validation.calibrate.for_trace),
spread as `compare --calibrate` spreads them over a trace of `none` alone at 1 and 4 (2 runs a
trace, CYCLES cycles of them a trace, default 2: a whole cycle before every run). One thread, the
engine's allocator settings, one untimed pair of runs first. Prints per run the median decode
step (every sequence decoding, no prefill) at 1 and at 4 and their ratio, then each way's medians."""
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))
from validation.calibrate import for_trace  # noqa: E402
from validation.timing import settled_reference  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "0.51.0"))
from reference_ab import decode_median, family_engine  # noqa: E402


def main(pairs: int = 5, cycles: int = 2) -> None:
    trace, source, model, _ = family_engine()
    tick = for_trace(trace, source.spec).spread(2, cycles)
    for c in (1, 4):
        decode_median(trace, source, model, c, None)  # untimed
    ways: dict[str, list[tuple[float, float]]] = {"in context": [], "bare": []}
    for i in range(pairs):
        for way in ways if i % 2 == 0 else reversed(list(ways)):
            got = []
            for c in (1, 4):
                if way == "in context":
                    tick()
                got.append(decode_median(trace, source, model, c, settled_reference if way == "in context" else None)[0])
            ways[way].append(tuple(got))
            print(f"pair {i + 1} {way:10}: at 1 {got[0] * 1e3:.3f} ms, at 4 {got[1] * 1e3:.3f} ms, "
                  f"4 over 1 {got[1] / got[0]:.3f}", flush=True)
    for way, v in ways.items():
        print(f"{way:10}: medians at 1 {statistics.median(a for a, _ in v) * 1e3:.3f} ms, at 4 "
              f"{statistics.median(b for _, b in v) * 1e3:.3f} ms, 4 over 1 {statistics.median(b / a for a, b in v):.3f}")


if __name__ == "__main__":
    main(*(int(x) for x in sys.argv[1:]))
