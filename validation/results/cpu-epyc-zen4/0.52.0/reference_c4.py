"""Whether the host-speed reference after every engine step slows the steps at concurrency C:
the family's `none`, runs alternating with and without it (order swapped pair to pair).

    python validation/results/cpu-epyc-zen4/0.52.0/reference_c4.py [C] [PAIRS]

0.51.0's reference_ab.py at 1 and 4 with 6 pairs; this one pairs more runs at one level. One
thread, the engine's allocator settings, one untimed run first; prints each way's median of the
runs' median decode steps (every sequence decoding, no prefill) and the pairs' ratios sorted."""
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))
from validation.timing import settled_reference  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "0.51.0"))
from reference_ab import decode_median, family_engine  # noqa: E402


def main(c: int = 4, pairs: int = 20) -> None:
    trace, source, model, _ = family_engine()
    decode_median(trace, source, model, c, None)  # untimed
    ways: dict[str, list[float]] = {"with": [], "without": []}
    for i in range(pairs):
        for way in (("with", "without") if i % 2 == 0 else ("without", "with")):
            ways[way].append(decode_median(trace, source, model, c, settled_reference if way == "with" else None)[0])
    ratios = sorted(a / b for a, b in zip(ways["with"], ways["without"]))
    print(f"concurrency {c}, {pairs} pairs: median decode step with the reference "
          f"{statistics.median(ways['with']) * 1e3:.3f} ms, without {statistics.median(ways['without']) * 1e3:.3f} ms; "
          f"with over without, pair by pair: median {statistics.median(ratios):.3f} [{' '.join(f'{r:.2f}' for r in ratios)}]")


if __name__ == "__main__":
    main(*(int(x) for x in sys.argv[1:]))
