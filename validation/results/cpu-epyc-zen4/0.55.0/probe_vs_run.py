"""The calibration's in-situ decode probe against the family's own `none` run, paired in one process.

    python validation/results/cpu-epyc-zen4/0.55.0/probe_vs_run.py ROUNDS [CONCURRENCY...]

Each round, for each concurrency c (default 16 32): the probe's plain-decoding run
(validation.reuse's: random weights of the family's shape, c sequences at once after 128-token
prompts) and then the family's `none` run of traces/family-schemes-c16.yaml at concurrency c
(trained weights, closed loop, 32 requests), both timed by validation.reuse.ProductClock. Prints,
over each run's steps with every sequence decoding (no prefill), the medians of: the step
(the runner's own duration), the target forward, its products (all layers), a later layer whole,
a later layer's attention call, the LM head, the keys a step attends to and the longest
sequence's keys times c (the keys as padded)."""
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
from validation.host_probes import checkpoint_of, probe_engine  # noqa: E402
from validation.reuse import ProductClock  # noqa: E402


def timed(trace, scheme, requests, model, c, prompts=None):
    longest, forwards = [], []
    inner = model.forward

    def forward(*args, **kwargs):  # the longest sequence's keys, and the whole forward's seconds
        longest.append(int(args[0].kv_lens.max()))
        t0 = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            forwards.append(time.perf_counter() - t0)
    model.forward = forward
    ops = model.ops_unchecked  # ProductClock wraps its attention call; restored after
    clock = ProductClock(model)
    with clock:
        res = run_scheme(trace, scheme, requests, model, prompts=prompts)
    del model.forward  # the instance's wrappers (ProductClock's over ours)
    model.ops_unchecked = ops
    cols = res.result.steps.columns()
    # clock.steps[0] and forwards[0]: the runner's untimed warm-up pass
    rows = []
    for i, s in enumerate(clock.steps[1:]):
        if int(cols["batch_size"][i]) != c or cols["prefill_tokens"][i] or "layer" not in s:
            continue
        rows.append((cols["duration"][i], forwards[i + 1], sum(t for _, t in s["target"].get("layer", [])),
                     s["layer"], s["attention"], sum(t for _, t in s["target"].get("lm", [])), s["keys"],
                     longest[i + 1] * c))
    rows = rows[3:]
    med = [statistics.median(r[k] for r in rows) for k in range(8)]
    return len(rows), med


def main(rounds: str, *levels: str) -> None:
    torch.set_num_threads(1)
    retain_freed_memory()
    levels = [int(x) for x in levels] or [16, 32]
    fam = load_trace(ROOT / "traces" / "family-schemes-c16.yaml")
    source, model, _ = build(fam)
    none = fam.speculation[0]
    assert none.label == "none"
    print(f"# {' '.join(sys.argv)}  ({time.strftime('%H:%M:%S')})")
    print("# medians: step, forward, products, later layer, its attention (ms); lm head (ms); keys; padded keys")
    for k in range(int(rounds)):
        for c in levels:
            trace, pmodel, _, preq = probe_engine(c, "cpu", {"scheme": "none"}, 40, 128, checkpoint_of(fam.model))
            n, m = timed(trace, trace.speculation[0], preq, pmodel, c)
            print(f"round {k + 1} c{c:<3} probe {n:4d} steps  " + fmt(m))
            n, m = timed(fam, none, make_requests(fam.workload, fam.seed, c), model, c, prompts=source.prompts)
            print(f"round {k + 1} c{c:<3} run   {n:4d} steps  " + fmt(m), flush=True)
    print(f"# end {time.strftime('%H:%M:%S')}")


def fmt(m):
    return (" ".join(f"{x * 1e3:7.3f}" for x in m[:5]) + f"  lm {m[5] * 1e3:.3f}  keys {m[6]:.0f} padded {m[7]:.0f}"
            + f"  layer-attn {(m[3] - m[4]) * 1e3:.3f}")


if __name__ == "__main__":
    main(*sys.argv[1:])
