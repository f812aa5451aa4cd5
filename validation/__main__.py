"""`python -m validation compare TRACE --out DIR [--hardware PROFILE]` (see validation/compare.py)."""
import argparse
import sys
from pathlib import Path

from sim.cli import fail
from sim.errors import SpecError
from validation.compare import compare, print_comparison


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m validation")
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("compare", help="run a trace through the engine and the simulator and compare")
    c.add_argument("trace", type=Path)
    c.add_argument("--out", type=Path, required=True)
    c.add_argument("--hardware", type=Path, default=None, help="measured profile (default traces/hardware/cpu-measured.yaml)")
    st = sub.add_parser("steptime", help="time the engine's forward over a grid and compare with the simulator")
    st.add_argument("--out", type=Path, required=True)
    st.add_argument("--hardware", type=Path, default=None, help="measured profile (default traces/hardware/<device>-measured.yaml)")
    st.add_argument("--fit", action="store_true", help="also fit efficiencies on half the grid, test on the rest")
    st.add_argument("--quick", action="store_true", help="a small grid (CI)")
    st.add_argument("--repeats", type=int, default=5)
    for sp in (c, st):
        sp.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    args = ap.parse_args(argv)
    if args.threads:
        import torch
        torch.set_num_threads(args.threads)
    if args.cmd == "steptime":
        from validation.steptime import run
        res = run(args.out, args.hardware, args.fit, args.quick, args.repeats)
        e = res["errors"]
        print(f"step time, {e['points']} points: median |error| {e['median_abs']:.1%}, p90 {e['p90_abs']:.1%}, "
              f"max {e['max_abs']:.1%} (median signed {e['median_signed']:+.1%})")
        for k, v in res["by_kind"].items():
            print(f"  {k:8} median |error| {v['median_abs']:.1%}  p90 {v['p90_abs']:.1%}  signed {v['median_signed']:+.1%}")
        if "fit" in res:
            f = res["fit"]
            print(f"fit on {f['train_points']} points: {f['params']}; held-out median |error| "
                  f"{f['test']['median_abs']:.1%}, p90 {f['test']['p90_abs']:.1%}")
        print(f"wrote {args.out / 'steptime.json'}")
        return 0
    try:
        result = compare(args.trace, args.out, args.hardware, progress=sys.stderr.isatty())
    except SpecError as exc:
        return fail(exc)
    print_comparison(result)
    print(f"wrote {args.out / 'comparison.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
