"""Whether the host-speed reference that validation.compare runs after every engine step slows
the steps it sits between: the family's `none` at concurrency 1 and 4, runs alternating with
and without it.

    python validation/results/cpu-epyc-zen4/0.51.0/reference_ab.py [PAIRS]

One thread, the engine's allocator settings, one untimed run first; prints each run's median
decode-step time (every sequence decoding, no prefill) and the medians of each way, and each
run's host speed as the reference read it (runs with it; relative to their first): whether the
loop feels what slows the steps."""
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))
from engine.cli import build  # noqa: E402
from engine.host_memory import retain_freed_memory  # noqa: E402
from engine.runner import run_scheme  # noqa: E402
from sim.spec import load_trace  # noqa: E402
from sim.workload import make_requests  # noqa: E402
from validation.timing import settled_reference  # noqa: E402

ROOT = Path(__file__).resolve().parents[4]


def decode_median(trace, source, model, c: int, reference) -> tuple[float, float | None]:
    """One run of `none` at concurrency c: its decode steps' median duration (s), and the host
    speed the reference read over it (None without)."""
    res = run_scheme(trace, trace.speculation[0], make_requests(trace.workload, trace.seed, c), model,
                     prompts=source.prompts, reference=reference)
    cols = res.result.steps.columns()
    keep = (cols["prefill_tokens"] == 0) & (cols["batch_size"] == c)
    return float(statistics.median(cols["duration"][keep])), res.reference_speed


def family_engine() -> tuple:
    """(trace, source, model, drafters) of traces/family-schemes.yaml, built, on one thread with
    the engine's allocator settings."""
    torch.set_num_threads(1)
    retain_freed_memory()
    trace = load_trace(ROOT / "traces" / "family-schemes.yaml")
    return (trace, *build(trace))


def time_forwards(model) -> list[float]:
    """Wrap the target's forward so that each call's seconds go on the returned list (in call
    order: the runner's untimed warm-up first); clear it before each run."""
    forward, times = model.forward, []

    def timed(step, cache, *rest):
        t0 = time.perf_counter()
        out = forward(step, cache, *rest)
        times.append(time.perf_counter() - t0)
        return out
    model.forward = timed
    return times


def main(pairs: int = 6) -> None:
    trace, source, model, _ = family_engine()
    for c in (1, 4):
        decode_median(trace, source, model, c, None)  # untimed
        ways: dict[str, list[float]] = {"without": [], "with": []}
        speeds: list[float] = []
        for i in range(pairs):
            for way in (("without", "with") if i % 2 == 0 else ("with", "without")):
                step, speed = decode_median(trace, source, model, c, settled_reference if way == "with" else None)
                ways[way].append(step)
                if speed:
                    speeds.append(speed)
        for way, v in ways.items():
            print(f"concurrency {c} {way:7} the reference: median {statistics.median(v) * 1e3:.3f} ms "
                  f"[{' '.join(f'{x * 1e3:.2f}' for x in v)}]")
        timed = ways["with"]
        print(f"  the reference's host speed in the runs with it, over the first's: "
              f"[{' '.join(f'{x / speeds[0]:.3f}' for x in speeds)}]; their steps over the first's: "
              f"[{' '.join(f'{x / timed[0]:.3f}' for x in timed)}]")


if __name__ == "__main__":
    main(*(int(x) for x in sys.argv[1:]))
