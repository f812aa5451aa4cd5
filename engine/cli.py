"""`python -m engine run TRACE [--out DIR] [--save-tokens]`: run a trace on the reference engine.

Same trace loading and request streams as the simulator (`sim.spec.load_trace`,
`sim.workload.make_requests`), the same report (`sim.report`, producer "engine"), written under
DIR (default out/<trace name>-engine). Bad input prints one line naming the file, the key path and
what was expected, and exits with code 2; never a traceback.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

from rich.console import Console

from engine.checkpoint import resolve
from engine.runner import EngineResult, check_schemes, run_scheme
from sim import report as rpt
from sim.cli import fail, finish, progress_bar
from sim.errors import SpecError
from sim.scheduler import RequestTooLarge
from sim.spec import TraceSpec, load_trace
from sim.workload import make_requests


def run_trace(trace: TraceSpec, out: Path | None, save_tokens: bool = False, progress: bool = True,
              console: Console | None = None) -> tuple[dict, dict[str, EngineResult]]:
    """Run every scheme (at every sweep concurrency, or open-loop) and write the report; returns
    (report, {run tag: EngineResult})."""
    console = console or Console(stderr=True)
    check_schemes(trace)
    source = resolve(trace)
    model = source.build()
    ran = replace(trace, model=source.spec)  # the report describes (and prices) the model actually run
    levels: list[int | None] = list(trace.sweep_concurrency) or [None]
    t0 = time.time()
    runs, results, engine_results = [], {}, {}
    with progress_bar(console, progress) as bar:
        for conc in levels:
            workload = make_requests(trace.workload, trace.seed, conc)
            for scheme in trace.speculation:
                tag = f"{scheme.label}-{conc if conc is not None else 'open'}"
                task = bar.add_task(f"{scheme.label} @ {conc if conc is not None else 'open'}",
                                    total=len(workload.requests))
                try:
                    res = run_scheme(ran, scheme, workload, model,
                                     progress=lambda done, total, task=task: bar.update(task, completed=done))
                except RequestTooLarge as exc:
                    raise SpecError(str(trace.path), "serving", f"{exc}; enlarge the pool (serving.kv_pages, "
                                    "serving.memory_fraction) or shorten workload lengths") from None
                entry = rpt.run_entry(ran, scheme, conc, res.result)
                runs.append(entry)
                results[entry["per_request"]] = res.result
                engine_results[tag] = res
                bar.remove_task(task)
    rpt.fill_speedups(runs, trace.speculation[0].label)
    report = rpt.build(ran, runs, producer="engine")
    report["engine"] = {**source.to_dict(), "weight_bytes": model.weight_bytes}
    if out is not None:
        try:
            rpt.write(out, report, results, wall={"started_unix": t0, "elapsed_s": time.time() - t0})
            if save_tokens:
                for tag, res in engine_results.items():
                    lines = "".join(json.dumps({"id": i, "tokens": t}) + "\n" for i, t in sorted(res.tokens.items()))
                    (out / "runs" / f"{tag}-tokens.jsonl").write_text(lines)
        except OSError as exc:
            raise SpecError(str(out), "--out", f"cannot write the report: {exc.strerror or exc}") from None
    return report, engine_results


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m engine", description="Run a trace on the reference engine.")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("run", help="run a trace (honours its sweep: list)")
    p.add_argument("trace", type=Path)
    p.add_argument("--out", type=Path, default=None, help="output folder (default: out/<trace name>-engine)")
    p.add_argument("--save-tokens", action="store_true", help="write runs/<label>-<conc>-tokens.jsonl")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--quiet", action="store_true", help="no table")
    p.add_argument("--threads", type=int, default=None,
                   help="CPU threads for torch (default: torch's own choice; 1 suits tiny models on a busy machine)")
    args = ap.parse_args(argv)
    if args.threads is not None:
        import torch
        torch.set_num_threads(max(1, args.threads))
    console = Console(stderr=True)
    try:
        trace = load_trace(args.trace)
        out = args.out or Path("out") / f"{trace.name}-engine"
        report, _ = run_trace(trace, out, save_tokens=args.save_tokens,
                              progress=not args.no_progress and console.is_terminal, console=console)
    except SpecError as exc:
        return fail(console, exc)
    return finish(report, out, args.quiet)


if __name__ == "__main__":
    sys.exit(main())
