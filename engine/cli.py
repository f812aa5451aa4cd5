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
from typing import Callable


from engine.checkpoint import resolve
from engine.runner import EngineResult, check_schemes, run_scheme
from sim import report as rpt
from sim.cli import fail, finish, run_levels, writing
from sim.errors import SpecError
from sim.spec import TraceSpec, load_trace


def build(trace: TraceSpec) -> tuple:
    """(source, model, drafters): the trace's engine section resolved (engine.checkpoint) and
    its model and drafters built. Callers that run one trace several times build once: a random
    8B-shaped model draws its weights on the CPU, about half a minute."""
    check_schemes(trace)
    source = resolve(trace)
    model = source.build()
    return source, model, source.drafters_for(model, trace.speculation)


def run_trace(trace: TraceSpec, out: Path | None, save_tokens: bool = False, progress: bool = True,
              between: Callable[[], None] | None = None,
              reference: Callable[[], float] | None = None, built: tuple | None = None,
              scheme_major: bool = False) -> tuple[dict, dict[str, EngineResult]]:
    """Run every scheme (at every sweep concurrency, or open-loop) and write the report; returns
    (report, {run tag: EngineResult}). `between` runs before each scheme's run (validation's
    calibration probes, spread over the engine's minutes); `reference` after every step,
    outside the engine's clock, returning the seconds it timed (EngineResult.reference_speed: the
    host's speed during the run). `built`: what `build` returned for this trace (the same
    schemes, in any order), else it is built here. `scheme_major`: each scheme runs its
    concurrency levels back to back (sim.cli.run_levels)."""
    if built is None:
        built = build(trace)  # which checks the schemes first
    else:
        check_schemes(trace)
    source, model, drafters = built
    ran = replace(trace, model=source.spec)  # the report describes (and prices) the model actually run
    levels: list[int | None] = list(trace.sweep_concurrency) or [None]
    t0 = time.time()
    engine_results: dict[str, EngineResult] = {}

    def execute(scheme, workload, tag, on_progress):
        if between is not None:
            between()
        res = engine_results[tag] = run_scheme(ran, scheme, workload, model, progress=on_progress, prompts=source.prompts,
                                                 drafters=drafters, reference=reference)
        if out is not None and save_tokens:
            writing(out, (out / "runs").mkdir, parents=True, exist_ok=True)
            lines = "".join(json.dumps({"id": i, "tokens": t}) + "\n" for i, t in sorted(res.tokens.items()))
            writing(out, (out / "runs" / f"{tag}-tokens.jsonl").write_text, lines)
        return res.result

    runs = run_levels(trace, levels, execute, out, progress, report_trace=ran, scheme_major=scheme_major)
    report = rpt.build(ran, runs, producer="engine")
    report["engine"] = {**source.to_dict(), "weight_bytes": model.weight_bytes}
    if drafters is not None and drafters.draft is not None:  # what a `draft` scheme really ran
        report["engine"]["draft_model"] = drafters.draft.spec.to_dict()
    if out is not None:
        writing(out, rpt.write, out, report, wall={"started_unix": t0, "elapsed_s": time.time() - t0})
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
    try:
        trace = load_trace(args.trace)
        out = args.out or Path("out") / f"{trace.name}-engine"
        report, _ = run_trace(trace, out, save_tokens=args.save_tokens,
                              progress=not args.no_progress and sys.stderr.isatty())
    except SpecError as exc:
        return fail(exc)
    return finish(report, out, args.quiet)


if __name__ == "__main__":
    sys.exit(main())
