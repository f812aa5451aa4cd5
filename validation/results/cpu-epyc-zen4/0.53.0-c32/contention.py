"""How `none`'s decode step at concurrency 1, 4 and 32 and the host-speed reference loop feel a
neighbour streaming memory on the other core: whether the comparison's reference reads the
spells that slow the engine's steps at 32.

    python validation/results/cpu-epyc-zen4/0.53.0-c32/contention.py [PAIRS] [MB]

The engine (traces/family-schemes-c32.yaml's `none`, one thread, the engine's allocator
settings) is pinned to core 0. For each of PAIRS (default 5) pairs, alternating which comes
first, it runs once quiet and once with a child process pinned to core 1 copying an MB-MiB
(default 256) buffer over and over (numpy). Each way prints the median decode-step time (every
sequence decoding, no prefill) at each concurrency and the reference loop's speed (the host's
speed as validation.compare reads it, relative to the first quiet reading)."""
import multiprocessing as mp
import os
import statistics
import sys
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT))
from engine.cli import build  # noqa: E402
from engine.host_memory import retain_freed_memory  # noqa: E402
from engine.runner import run_scheme  # noqa: E402
from sim.spec import load_trace  # noqa: E402
from sim.workload import make_requests  # noqa: E402
from validation.host_speed import reference_speed  # noqa: E402

LEVELS = (1, 4, 32)


def stream(mb: int) -> None:
    """Copy an mb-MiB buffer into another forever, on core 1."""
    os.sched_setaffinity(0, {1})
    a = np.ones(mb * 2**18, dtype=np.float32)  # (mb MiB / 4 bytes,)
    b = np.empty_like(a)
    while True:
        np.copyto(b, a)


def main(pairs: str = "5", mb: str = "256") -> None:
    os.sched_setaffinity(0, {0})
    torch.set_num_threads(1)
    retain_freed_memory()
    trace = load_trace(ROOT / "traces" / "family-schemes-c32.yaml")
    source, model, drafters = build(trace)
    none = trace.speculation[0]

    def step_ms(c: int) -> float:
        cols = run_scheme(trace, none, make_requests(trace.workload, trace.seed, c), model,
                          prompts=source.prompts, drafters=drafters).result.steps.columns()
        keep = (cols["prefill_tokens"] == 0) & (cols["batch_size"] == c)
        return float(statistics.median(cols["duration"][keep])) * 1e3

    for c in LEVELS:
        step_ms(c)  # untimed
    base = reference_speed()
    ways: dict[str, dict] = {"quiet": {}, "stream": {}}
    for i in range(int(pairs)):
        for way in (("quiet", "stream") if i % 2 == 0 else ("stream", "quiet")):
            child = mp.Process(target=stream, args=(int(mb),), daemon=True) if way == "stream" else None
            if child:
                child.start()
                reference_speed()  # let the neighbour start streaming
            got = {c: step_ms(c) for c in LEVELS} | {"ref": reference_speed() / base}
            if child:
                child.terminate()
                child.join()
            for k, v in got.items():
                ways[way].setdefault(k, []).append(v)
            print(f"{way:6} " + "  ".join(f"c{c} {got[c]:7.3f} ms" for c in LEVELS) + f"  reference {got['ref']:.3f}", flush=True)
    q, s = ({k: statistics.median(v) for k, v in ways[w].items()} for w in ("quiet", "stream"))
    print("medians, streaming over quiet: " + "  ".join(f"c{c} {s[c] / q[c]:.3f}" for c in LEVELS)
          + f"  reference speed {s['ref'] / q['ref']:.3f}")


if __name__ == "__main__":
    main(*sys.argv[1:])
