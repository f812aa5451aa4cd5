"""`python -m sim run|sweep TRACE [--out DIR]`: the thin shell around the pure core.

Bad input (a SpecError, a request that can never fit) prints one line naming the file, the key
path and what was expected, and exits with code 2; never a traceback.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path


from sim import report as rpt
from sim.errors import SpecError
from sim.scheduler import RequestTooLarge
from sim.simulator import simulate
from sim.spec import TraceSpec, load_trace
from sim.workload import make_requests


def run_trace(trace: TraceSpec, out: Path | None, sweep: bool | None = None, progress: bool = True,
              fast: bool = True, draw: int = 0, keep: dict | None = None) -> dict:
    """Simulate every scheme (at every sweep concurrency) and write the report; returns it.
    draw: which of the simulator's random draws (sim.simulator.draw_seed); keep: filled with
    {run tag: RunResult} when given (validation pools several draws)."""
    levels: list[int | None] = list(trace.sweep_concurrency) if (sweep is not False and trace.sweep_concurrency) else [None]
    if sweep and not trace.sweep_concurrency:
        raise SpecError(str(trace.path), "sweep.concurrency", "missing: `sweep` needs a list of concurrency levels")
    t0 = time.time()
    def execute(scheme, workload, tag, on_progress):
        res = simulate(trace, scheme, workload, fast=fast, progress=on_progress, draw=draw)
        if keep is not None:
            keep[tag] = res
        return res

    runs = run_levels(trace, levels, execute, out, progress)
    report = rpt.build(trace, runs)
    if out is not None:
        writing(out, rpt.write, out, report, wall={"started_unix": t0, "elapsed_s": time.time() - t0})
        if len(levels) > 1:  # a sweep: the planner's CSV and figures (matplotlib loads only then)
            from sim import plots

            writing(out, plots.write_csv, report, out / "sweep.csv")
            writing(out, plots.plot_all, report, out / "plots")
    return report


def run_levels(trace: TraceSpec, levels: list[int | None], execute, out: Path | None, progress: bool = True,
               report_trace: TraceSpec | None = None, scheme_major: bool = False) -> list[dict]:
    """The loop both executors share: every concurrency level (None = the trace's own arrivals) x
    every scheme, the same requests for each scheme. `execute(scheme, workload, tag, on_progress)`
    returns a RunResult; each run's CSVs are written as soon as it ends. Returns the report's runs,
    level by level, each level's schemes in the trace's order. `scheme_major`: each scheme runs
    all its levels back to back (validation's engine runs, so that a scheme's levels meet the
    same host speed: validation/scaling.py); the report's order stays the same."""
    order = [(c, s) for s in trace.speculation for c in levels] if scheme_major else \
        [(c, s) for c in levels for s in trace.speculation]
    workloads = {c: make_requests(trace.workload, trace.seed, c) for c in levels}
    entries: dict[tuple, dict] = {}  # (level, label) -> the run's report entry
    with progress_bar(progress) as bar:
        for conc, scheme in order:
            workload = workloads[conc]
            tag = rpt.run_tag(scheme.label, conc)
            task = bar.add_task(f"{scheme.label} @ {conc if conc is not None else 'open'}", total=len(workload.requests))
            try:
                res = execute(scheme, workload, tag, lambda done, total, task=task: bar.update(task, completed=done))
            except RequestTooLarge as exc:
                raise SpecError(str(trace.path), "serving", f"{exc}; enlarge the pool (serving.kv_pages, "
                                "serving.memory_fraction) or shorten workload lengths") from None
            entry = rpt.run_entry(report_trace or trace, scheme, conc, res)
            entries[(conc, scheme.label)] = entry
            if out is not None:
                writing(out, rpt.write_run, out, entry, res)
            del res
            bar.remove_task(task)
    runs = [entries[(c, s.label)] for c in levels for s in trace.speculation]
    rpt.fill_speedups(runs, trace.speculation[0].label)
    return runs


def writing(out: Path, fn, *args, **kwargs):
    """Run a writer; a file-system failure becomes a clean error naming --out."""
    try:
        return fn(*args, **kwargs)
    except OSError as exc:
        raise SpecError(str(out), "--out", f"cannot write the report: {exc.strerror or exc}") from None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sim", description="Simulate speculative decoding on a trace.")
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name, help_ in (("run", "simulate a trace (honours its sweep: list)"),
                        ("sweep", "simulate a trace at each sweep.concurrency level")):
        p = sub.add_parser(name, help=help_)
        p.add_argument("trace", type=Path)
        p.add_argument("--out", type=Path, default=None, help="output folder (default: out/<trace name>)")
        p.add_argument("--no-progress", action="store_true", help="no progress bar")
        p.add_argument("--quiet", action="store_true", help="no table")
        p.add_argument("--step-by-step", action="store_true", help="price every step alone (slow; for checking)")
    args = ap.parse_args(argv)
    try:
        trace = load_trace(args.trace)
        out = args.out or Path("out") / trace.name
        report = run_trace(trace, out, sweep=True if args.cmd == "sweep" else None,
                           progress=not args.no_progress and sys.stderr.isatty(), fast=not args.step_by_step)
    except SpecError as exc:
        return fail(exc)
    return finish(report, out, args.quiet)


class _NoProgress:
    """The progress bar's interface, doing nothing (rich loads only for a real bar)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def add_task(self, *args, **kwargs):
        return 0

    def update(self, *args, **kwargs):
        pass

    def remove_task(self, *args):
        pass


def progress_bar(enabled: bool):
    """One bar per run (scheme x concurrency) on stderr, counting finished requests."""
    if not enabled:
        return _NoProgress()
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=Console(stderr=True), transient=True)


def fail(exc: SpecError) -> int:
    """Bad input: one line naming the file, the key path and what was expected; exit code 2."""
    print(f"error: {exc}", file=sys.stderr)
    return 2


def finish(report: dict, out: Path, quiet: bool) -> int:
    """The table (unless quiet) and where the report went; exit code 0."""
    if not quiet:
        from rich.console import Console

        from sim.table import print_table
        print_table(report, Console())
    print(f"wrote {out / 'report.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
