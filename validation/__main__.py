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
    args = ap.parse_args(argv)
    try:
        result = compare(args.trace, args.out, args.hardware, progress=sys.stderr.isatty())
    except SpecError as exc:
        return fail(exc)
    print_comparison(result)
    print(f"wrote {args.out / 'comparison.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
