"""Whether the host-speed reading that `compare` takes after every engine step
(validation.timing.settled_reference) slows the family's `none` decode steps at 32 sequences.

    python validation/results/cpu-epyc-zen4/0.55.0/reference_ab.py ROUNDS

Each round runs traces/family-schemes-c32.yaml's `none` at concurrency 32 twice in one process,
once plain and once with the reference after every step (off its clock), in alternating order,
and prints the median duration of the steps with every sequence decoding."""
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT))
from engine.cli import build  # noqa: E402
from engine.host_memory import retain_freed_memory  # noqa: E402
from engine.runner import run_scheme  # noqa: E402
from sim.spec import load_trace  # noqa: E402
from sim.workload import make_requests  # noqa: E402
from validation.timing import settled_reference  # noqa: E402


def main(rounds: str) -> None:
    torch.set_num_threads(1)
    retain_freed_memory()
    trace = load_trace(ROOT / "traces" / "family-schemes-c32.yaml")
    source, model, _ = build(trace)
    none = trace.speculation[0]
    print(f"# {' '.join(sys.argv)}  ({time.strftime('%H:%M:%S')})")
    got = {"plain": [], "reference": []}
    for k in range(int(rounds)):
        for way in (("plain", "reference") if k % 2 == 0 else ("reference", "plain")):
            res = run_scheme(trace, none, make_requests(trace.workload, trace.seed, 32), model, prompts=source.prompts,
                             reference=settled_reference if way == "reference" else None)
            cols = res.result.steps.columns()
            med = statistics.median(float(cols["duration"][i]) for i in range(len(cols["duration"]))
                                    if int(cols["batch_size"][i]) == 32 and not cols["prefill_tokens"][i])
            got[way].append(med)
            print(f"round {k + 1} {way:9} {med * 1e3:7.3f} ms", flush=True)
    p, r = statistics.median(got["plain"]), statistics.median(got["reference"])
    print(f"medians: plain {p * 1e3:.3f} ms, with the reference {r * 1e3:.3f} ms, ratio {r / p:.3f}")
    print(f"# end {time.strftime('%H:%M:%S')}")


if __name__ == "__main__":
    main(*sys.argv[1:])
