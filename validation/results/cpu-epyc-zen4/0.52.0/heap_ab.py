"""Whether a large live Python heap slows the engine's steps, as a comparison's process holds one
(every run's results kept until the end): the family's `none` at concurrency 4, runs alternating
with and without N million small live objects (dicts of floats, gc-tracked, like step records).

    python validation/results/cpu-epyc-zen4/0.52.0/heap_ab.py [PAIRS] [MILLIONS]

One thread, the engine's allocator settings, one untimed run first; prints the live gc-tracked
objects one kept run result adds, each run's median decode-step time and mean step time (the
mean feels rare pauses such as full collections), and the medians of each way."""
import gc
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))
from engine.runner import run_scheme  # noqa: E402
from sim.workload import make_requests  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "0.51.0"))
from reference_ab import family_engine  # noqa: E402


def steps(trace, source, model, c: int):
    """One run of `none` at concurrency c: (median decode step, mean step) in seconds, and the result."""
    res = run_scheme(trace, trace.speculation[0], make_requests(trace.workload, trace.seed, c), model,
                     prompts=source.prompts)
    cols = res.result.steps.columns()
    keep = (cols["prefill_tokens"] == 0) & (cols["batch_size"] == c)
    return float(statistics.median(cols["duration"][keep])), float(cols["duration"].mean()), res


def main(pairs: int = 4, millions: float = 4.0) -> None:
    trace, source, model, _ = family_engine()
    steps(trace, source, model, 4)  # untimed
    before = len(gc.get_objects())
    kept = steps(trace, source, model, 4)[2]
    print(f"one kept run result of `none` at 4 adds {len(gc.get_objects()) - before} gc-tracked objects")
    del kept
    ways: dict[str, list[tuple[float, float]]] = {"without": [], "with": []}
    for i in range(pairs):
        for way in (("without", "with") if i % 2 == 0 else ("with", "without")):
            heap = [{"t": float(j), "n": j} for j in range(int(millions * 1e6))] if way == "with" else None
            ways[way].append(steps(trace, source, model, 4)[:2])
            del heap
    for way, v in ways.items():
        print(f"{way:7} {millions:g}M live objects: median decode step {statistics.median(m for m, _ in v) * 1e3:.3f} ms "
              f"[{' '.join(f'{m * 1e3:.2f}' for m, _ in v)}], mean step {statistics.median(a for _, a in v) * 1e3:.3f} ms "
              f"[{' '.join(f'{a * 1e3:.2f}' for _, a in v)}]")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 4, float(sys.argv[2]) if len(sys.argv) > 2 else 4.0)
