"""Speculative decoding on this CPU: every scheme's throughput against plain decoding, measured
side by side, on the trained tiny family (engine/family) and held-out code prompts.

For each concurrency (closed loop, max(8, 2 x concurrency) requests of 128 prompt + 64 output
tokens, greedy), every scheme of traces/family-schemes.yaml runs once per repeat, in turn, so
slow phases of this shared machine hit all of them alike. Printed: median tokens/s of `none`,
and per scheme the median over repeats of its speedup (its tok/s / none's tok/s of the same
repeat), with tokens per step.

    python bench/bench_schemes.py [--levels 1,2,4,8,16,32] [--repeats 3] [--threads 1]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
from dataclasses import replace
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine.checkpoint import resolve  # noqa: E402
from engine.runner import run_scheme  # noqa: E402
from sim.spec import load_trace  # noqa: E402
from sim.workload import make_requests  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trace", type=Path, default=ROOT / "traces" / "family-schemes.yaml")
    ap.add_argument("--levels", default="1,2,4,8,16,32")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--schemes", default=None, help="comma-separated labels (default: all)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    trace = load_trace(args.trace)
    source = resolve(trace)
    model = source.build()
    drafters = source.drafters(model)
    ran = replace(trace, model=source.spec)
    schemes = [s for s in trace.speculation if args.schemes is None or s.label in args.schemes.split(",") or s.name == "none"]
    print(f"{trace.name}: {source.description}, {args.threads} thread(s), {args.repeats} repeats; "
          f"torch {torch.__version__}", flush=True)
    print(f"{'conc':>4} {'scheme':12} {'tok/s':>8} {'speedup':>8} {'min-max':>11} {'tok/step':>8}", flush=True)
    for conc in (int(x) for x in args.levels.split(",")):
        wl = make_requests(replace(trace.workload, requests=max(8, 2 * conc)), trace.seed, conc)
        rates: dict[str, list[float]] = {s.label: [] for s in schemes}
        tps: dict[str, float] = {}
        for _ in range(args.repeats):
            for s in schemes:
                res = run_scheme(ran, s, wl, model, prompts=source.prompts, drafters=drafters)
                toks = sum(len(t) for t in res.tokens.values())
                rates[s.label].append(toks / res.result.duration)
                r = res.result
                tps[s.label] = r.decode_tokens / max(1, r.decode_seq_steps)
        base = rates["none"]
        for s in schemes:
            ratio = [a / b for a, b in zip(rates[s.label], base)]
            print(f"{conc:>4} {s.label:12} {statistics.median(rates[s.label]):8.1f} {statistics.median(ratio):7.2f}x "
                  f"{min(ratio):5.2f}-{max(ratio):4.2f} {tps[s.label]:8.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
