"""Where the engine's decode step goes, against the simulator's parts, for `none` on the family.

    python validation/results/cpu-epyc-zen4/0.51.0/decompose.py COMPARE_DIR [TRACE.yaml] [CONCURRENCY...]

Runs the trace's (default traces/family-schemes.yaml) `none` scheme through the engine (one
thread, the engine's allocator settings) at each concurrency (default 1 and 4), timing every
target forward inside its steps,
and prices each decode step (every sequence decoding, no prefill) as the simulator does under
the profile a comparison measured (COMPARE_DIR/sim-trace.yaml: its model and hardware): the
forward (sim.cost.ForwardCost) and the host time around it (host_time with the step's allocator
operations, verify_host for its one call). Prints medians over the decode steps of each part."""
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))
from engine.cli import build  # noqa: E402
from engine.host_memory import retain_freed_memory  # noqa: E402
from engine.runner import run_scheme  # noqa: E402
from sim.cost import ForwardCost, Work, host_time, verify_host  # noqa: E402
from sim.spec import load_trace  # noqa: E402
from sim.workload import make_requests  # noqa: E402

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from reference_ab import time_forwards  # noqa: E402


def main(compared: str, *args: str) -> None:
    torch.set_num_threads(1)
    retain_freed_memory()
    named = [a for a in args if a.endswith(".yaml")]
    levels = [a for a in args if not a.endswith(".yaml")]
    trace = load_trace(named[0] if named else ROOT / "traces" / "family-schemes.yaml")
    priced = load_trace(Path(compared) / "sim-trace.yaml")
    hw, fwd = priced.hardware, ForwardCost(priced.model, priced.hardware, priced.tp)
    source, model, drafters = build(trace)
    scheme = trace.speculation[0]
    assert scheme.label == "none"
    times = time_forwards(model)
    for c in [int(x) for x in levels] or [1, 4]:
        times.clear()
        res = run_scheme(trace, scheme, make_requests(trace.workload, trace.seed, c), model, prompts=source.prompts)
        cols = res.result.steps.columns()
        fw = times[1:]  # the first is the runner's untimed warm-up
        assert len(fw) == len(cols["duration"])
        rows = []
        for i in range(len(fw)):
            b, ctx = int(cols["batch_size"][i]), int(cols["context_tokens"][i])
            if cols["prefill_tokens"][i] or b != c:
                continue
            w = Work(tokens=b, seqs=b, pairs=ctx + b, kv_read=ctx + b, lm_tokens=b)
            host = host_time(hw, b, int(cols["page_allocs"][i] + cols["page_frees"][i])) + verify_host(hw)
            rows.append((cols["duration"][i], fw[i], fwd(w).time, host))
        med = [statistics.median(r[k] for r in rows) * 1e3 for k in range(4)]
        print(f"concurrency {c}: {len(rows)} decode steps, medians (ms): engine step {med[0]:.3f} = forward {med[1]:.3f}"
              f" + rest {med[0] - med[1]:.3f}; simulator forward {med[2]:.3f} ({med[2] / med[1] - 1:+.1%})"
              f" + host {med[3]:.3f} ({med[3] / (med[0] - med[1]) - 1:+.1%}) = {med[2] + med[3]:.3f}"
              f" ({(med[2] + med[3]) / med[0] - 1:+.1%})")


if __name__ == "__main__":
    main(*sys.argv[1:])
