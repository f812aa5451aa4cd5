"""`python -m validation compare TRACE --out DIR [--hardware PROFILE | --calibrate] [--repeats N] [--warmup N]
[--draws N] [--engine-only]`,
`python -m validation steptime --out DIR ...` and
`python -m validation split TRACE --out DIR [--hardware PROFILE] [--concurrency N] [--rounds R]` and
`python -m validation reprice DIR --hardware PROFILE --out OUT [--engine REPORT] [--draws N] [--refit HOW]`
(see validation/compare.py, validation/steptime.py, validation/split.py, validation/reprice.py)."""
import argparse
import sys
from pathlib import Path

from engine.host_memory import retain_freed_memory
from sim.cli import fail
from sim.errors import SpecError
from validation.compare import CALIBRATION_CYCLES, compare, print_comparison


def progress_line(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m validation")
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("compare", help="run a trace through the engine and the simulator and compare")
    c.add_argument("trace", type=Path)
    c.add_argument("--out", type=Path, required=True)
    c.add_argument("--hardware", type=Path, default=None, help="measured profile (default traces/hardware/cpu-measured.yaml)")
    c.add_argument("--repeats", type=int, default=1, help="engine runs of the trace (pooled: all their tokens over all their time)")
    c.add_argument("--warmup", type=int, default=1,
                   help="untimed engine runs of the trace before the timed ones (default 1; not compared)")
    c.add_argument("--draws", type=int, default=None,
                   help="the simulator's draws (default 4 x --repeats; its percentiles: the mean over groups of --repeats)")
    c.add_argument("--engine-only", action="store_true",
                   help="run the engine and write what the simulator needs (sim-trace.yaml, engine-pooled.json, "
                        "the acceptance files), then stop: `reprice DIR` prices it later")
    c.add_argument("--calibrate", action="store_true",
                   help="measure the profile with calibration probes run before each scheme's engine run")
    st = sub.add_parser("steptime", help="time the engine's forward over a grid and compare with the simulator")
    st.add_argument("--out", type=Path, required=True)
    st.add_argument("--hardware", type=Path, default=None,
                    help="a measured profile (default: calibration probes run between the grid's points)")
    st.add_argument("--fit", action="store_true", help="also fit efficiencies on half the grid, test on the rest")
    st.add_argument("--quick", action="store_true", help="a small grid (CI)")
    st.add_argument("--repeats", type=int, default=1, help="forward calls per point per pass (at least)")
    st.add_argument("--sample-ms", type=float, default=60.0,
                    help="a point's forward calls per pass run at least this long (default 60)")
    st.add_argument("--rounds", type=int, default=6, help="passes over the grid (each point's mean over all kept)")
    sp_ = sub.add_parser("split", help="split the engine's steps into drafting, target forward (in the run and "
                         "bare) and the rest, each against the simulator's price")
    sp_.add_argument("trace", type=Path)
    sp_.add_argument("--out", type=Path, required=True)
    sp_.add_argument("--hardware", type=Path, default=None, help="measured profile (default traces/hardware/cpu-measured.yaml)")
    sp_.add_argument("--concurrency", type=int, default=None,
                     help="closed-loop concurrency (default: the trace's first sweep level, else its own arrivals)")
    sp_.add_argument("--rounds", type=int, default=3, help="engine runs of each scheme (default 3)")
    sp_.add_argument("--calibrate", action="store_true",
                     help="measure the profile with calibration probes run between the engine's runs")
    rp = sub.add_parser("reprice", help="price a stored comparison again under another profile (the engine not rerun)")
    rp.add_argument("compared", type=Path, help="the directory a `compare` run wrote")
    rp.add_argument("--hardware", type=Path, required=True, help="the profile to price it with")
    rp.add_argument("--out", type=Path, required=True)
    rp.add_argument("--engine", type=Path, default=None,
                    help="the engine's report of another run of the same trace (default DIR/engine-pooled.json, "
                         "else DIR/engine/report.json)")
    rp.add_argument("--draws", type=int, default=None, help="the simulator's draws (default 4 for each engine run pooled)")
    rp.add_argument("--refit", choices=("request", "common", "none"), default=None,
                    help="fit the acceptance again from DIR/counts-<label>.json.gz: each request's counts shrunk by "
                         "its own factor (request, compare's way), by one for all (common), or not (none)")
    for sp in (c, sp_):
        sp.add_argument("--cycles", type=int, default=None,
                        help="with --calibrate: cycles of every probe per engine run of the trace (compare) "
                             "or per round (split); default 2")
    for sp in (c, st, sp_):
        sp.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    args = ap.parse_args(argv)
    retain_freed_memory()  # as `python -m engine` runs: no fresh pages for large per-step tensors
    if getattr(args, "calibrate", False) and args.hardware:
        ap.error("--calibrate measures the profile; it cannot be given with --hardware")
    if getattr(args, "cycles", None) is not None and (args.cycles < 1 or not args.calibrate):
        ap.error("--cycles must be at least 1, and goes with --calibrate")
    if getattr(args, "repeats", 1) < 1 or getattr(args, "rounds", 1) < 1:
        ap.error("--repeats and --rounds must be at least 1")
    if getattr(args, "concurrency", None) is not None and args.concurrency < 1:
        ap.error("--concurrency must be at least 1")
    if getattr(args, "draws", None) is not None and args.draws < getattr(args, "repeats", 1):
        ap.error("--draws must be at least --repeats")
    if getattr(args, "warmup", 0) < 0:
        ap.error("--warmup must be at least 0")
    if getattr(args, "sample_ms", 0.0) < 0:
        ap.error("--sample-ms must be at least 0")
    if getattr(args, "threads", None):
        import torch
        torch.set_num_threads(args.threads)
    if args.cmd == "steptime":
        from validation.steptime import run
        res = run(args.out, args.hardware, args.fit, args.quick, args.repeats, rounds=args.rounds,
                  sample_s=args.sample_ms / 1e3)
        e = res["errors"]
        print(f"step time, {e['points']} points: median |error| {e['median_abs']:.1%}, p90 {e['p90_abs']:.1%}, "
              f"max {e['max_abs']:.1%} (median signed {e['median_signed']:+.1%}); the measured times' median "
              f"standard error +-{res['noise_median']:.1%}")
        for k, v in res["by_kind"].items():
            print(f"  {k:8} median |error| {v['median_abs']:.1%}  p90 {v['p90_abs']:.1%}  signed {v['median_signed']:+.1%}")
        if "fit" in res:
            f = res["fit"]
            print(f"fit on {f['train_points']} points: {f['params']}; held-out median |error| "
                  f"{f['test']['median_abs']:.1%}, p90 {f['test']['p90_abs']:.1%}")
        print(f"wrote {args.out / 'steptime.json'}")
        return 0
    if args.cmd == "split":
        from validation.split import print_split, split
        try:
            res = split(args.trace, args.out, args.hardware, args.concurrency, args.rounds, args.calibrate,
                        args.cycles or CALIBRATION_CYCLES, progress=progress_line)
        except SpecError as exc:
            return fail(exc)
        print_split(res)
        print(f"wrote {args.out / 'split.json'}")
        return 0
    if args.cmd == "reprice":
        from validation.reprice import reprice
        try:
            result = reprice(args.compared, args.hardware, args.out, args.engine, args.draws,
                             progress=sys.stderr.isatty(), refit=args.refit)
        except SpecError as exc:
            return fail(exc)
        print_comparison(result)
        print(f"wrote {args.out / 'comparison.json'}")
        return 0
    try:
        result = compare(args.trace, args.out, args.hardware, progress=sys.stderr.isatty(), repeats=args.repeats,
                         calibrate=args.calibrate, warmup=args.warmup, draws=args.draws,
                         cycles=args.cycles or CALIBRATION_CYCLES, engine_only=args.engine_only)
    except SpecError as exc:
        return fail(exc)
    if args.engine_only:
        print(f"wrote the engine's side to {args.out}; price it with: python -m validation reprice {args.out} "
              f"--hardware {result['hardware']} --out OUT")
        return 0
    print_comparison(result)
    print(f"wrote {args.out / 'comparison.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
