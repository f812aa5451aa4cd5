"""Whether `none`'s decode steps at concurrency 32 run slower inside a comparison's process than
alone, and if so what of the comparison slows them.

    python validation/results/cpu-epyc-zen4/0.53.0-c32/c32_process.py alone [RUNS]
    python validation/results/cpu-epyc-zen4/0.53.0-c32/c32_process.py mixed [ROUNDS]

Both build traces/family-schemes-c32.yaml (every scheme's drafters), on one thread with the
engine's allocator settings, and print the median decode-step time (32 sequences decoding, no
prefill) of each run of `none`, with the host's speed read by the reference loop just before and
after it (off the engine's clock; relative to the process's first reading).
- alone: one untimed run of `none`, then RUNS (default 6) runs of `none`; no other scheme runs.
- mixed: one untimed pass of every scheme (the comparison's warm-up), then ROUNDS (default 6)
  rounds, each in a rotated order, of five ways of running `none`:
    plain     nothing else;
    reference the comparison's reference loop after every step (settled_reference);
    medusa    just after a run of `medusa` at 32;
    probes    just after one tick of the calibration's probes (as many as a comparison runs
              before each scheme's run);
    pass      inside a whole pass of the trace as the comparison runs it (rotated scheme order,
              the probes before every scheme, the reference after every step).
"""
import statistics
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT))
from engine.cli import build, run_trace  # noqa: E402
from engine.host_memory import retain_freed_memory  # noqa: E402
from engine.runner import run_scheme  # noqa: E402
from sim.spec import load_trace  # noqa: E402
from sim.workload import make_requests  # noqa: E402
from validation.calibrate import for_trace  # noqa: E402
from validation.compare import CALIBRATION_CYCLES  # noqa: E402
from validation.host_speed import reference_speed  # noqa: E402
from validation.pooling import rotated  # noqa: E402
from validation.timing import settled_reference  # noqa: E402

C = 32


def decode_median(result) -> float:
    """The median duration (ms) of a run's steps with every sequence decoding and no prefill."""
    cols = result.steps.columns()
    keep = (cols["prefill_tokens"] == 0) & (cols["batch_size"] == C)
    return float(statistics.median(cols["duration"][keep])) * 1e3


def main(mode: str, count: str = "6") -> None:
    torch.set_num_threads(1)
    retain_freed_memory()
    trace = load_trace(ROOT / "traces" / "family-schemes-c32.yaml")
    built = build(trace)
    source, model, drafters = built
    schemes = {s.label: s for s in trace.speculation}
    base = reference_speed()

    def run(label: str, reference=None):
        return run_scheme(trace, schemes[label], make_requests(trace.workload, trace.seed, C), model,
                          prompts=source.prompts, drafters=drafters, reference=reference).result

    def timed(way: str, fn) -> None:
        before = reference_speed()
        ms = fn()
        after = reference_speed()
        print(f"{way:9} {ms:7.3f} ms  host {before / base:.3f} {after / base:.3f}", flush=True)

    if mode == "alone":
        run("none")
        for _ in range(int(count)):
            timed("alone", lambda: decode_median(run("none")))
        return
    cal = for_trace(trace, source.spec)
    tick = cal.spread(len(trace.speculation), CALIBRATION_CYCLES)
    run_trace(trace, None, progress=False, built=built, scheme_major=True)  # the warm-up pass

    def whole_pass(i: int) -> float:
        _, by_tag = run_trace(rotated(trace, i, int(count)), None, progress=False, between=tick, built=built,
                              scheme_major=True, reference=settled_reference)
        return decode_median(by_tag[f"none-{C}"].result)

    ways = {
        "plain": lambda i: decode_median(run("none")),
        "reference": lambda i: decode_median(run("none", settled_reference)),
        "medusa": lambda i: (run("medusa"), decode_median(run("none")))[1],
        "probes": lambda i: (tick(), decode_median(run("none")))[1],
        "pass": whole_pass,
    }
    names = list(ways)
    for i in range(int(count)):
        for way in names[i % len(names):] + names[:i % len(names)]:
            timed(way, lambda: ways[way](i))


if __name__ == "__main__":
    main(*sys.argv[1:])
