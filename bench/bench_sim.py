"""Simulator speed and memory (issue 2 targets), whole process, medians over repeats.

    python bench/bench_sim.py [--repeats 5] [--scaling]

1. The 4,096-request trace (bench/traces/speed-4096.yaml: Llama-3-8B, h100-sxm, 512/128 tokens,
   Poisson 8 req/s, scheme none) as `python -m sim run ... --out TMP` in a fresh process: wall time
   per request, median of --repeats runs. Target: <= 0.5 ms/request. (Vidur 0.0.26 is quoted at
   about 8 ms/request on the same trace on a machine like this one; not measured here.)
   The same with EAGLE-2 60-token trees (bench/traces/speed-4096-eagle2.yaml), target the same.
2. --scaling: the same trace at 4k, 16k, 50k and 100k requests: wall time, ms/request, peak RSS.
   Targets: 100k requests under 1 GB; cost linear in requests.
Also prints the fast path against --step-by-step on the 4,096 trace, side by side.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
TRACE = ROOT / "bench" / "traces" / "speed-4096.yaml"
TRACE_EAGLE2 = ROOT / "bench" / "traces" / "speed-4096-eagle2.yaml"
RUNNER = ("import resource, sys; from sim.cli import main; rc = main(sys.argv[1:]); "
          "print('MAXRSS', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss); sys.exit(rc)")


def one(trace: Path, out: Path, extra=()) -> tuple[float, float]:
    """(wall seconds, peak RSS MB) of one whole simulator process."""
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", RUNNER, "run", str(trace), "--out", str(out), "--quiet",
                        "--no-progress", *extra], capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - t0
    if p.returncode:
        sys.exit(f"simulator failed: {p.stderr}")
    rss = int(next(line.split()[1] for line in p.stdout.splitlines() if line.startswith("MAXRSS")))
    return wall, rss / 1024


def with_requests(n: int, tmp: Path) -> Path:
    doc = yaml.safe_load(TRACE.read_text())
    doc["workload"]["requests"] = n
    doc["name"] = f"speed-{n}"
    path = tmp / f"speed-{n}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--scaling", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        n = yaml.safe_load(TRACE.read_text())["workload"]["requests"]
        fast = [one(TRACE, tmp / "fast")[0] for _ in range(args.repeats)]
        slow = [one(TRACE, tmp / "slow", ["--step-by-step"])[0] for _ in range(max(1, args.repeats // 2))]
        mf, ms = statistics.median(fast), statistics.median(slow)
        steps = json.loads((tmp / "fast" / "report.json").read_text())["runs"][0]["summary"]["steps"]
        print(f"speed-4096: {n} requests, {steps} steps")
        print(f"  fast path     : median {mf:.3f} s = {mf / n * 1e3:.3f} ms/request  (runs: {', '.join(f'{x:.2f}' for x in fast)})")
        print(f"  step-by-step  : median {ms:.3f} s = {ms / n * 1e3:.3f} ms/request  (fast is {ms / mf:.1f}x faster)")
        print(f"  target 0.5 ms/request: {'met' if mf / n * 1e3 <= 0.5 else 'MISSED'}")
        e2 = [one(TRACE_EAGLE2, tmp / "e2")[0] for _ in range(args.repeats)]
        me = statistics.median(e2)
        s2 = json.loads((tmp / "e2" / "report.json").read_text())["runs"][0]["summary"]
        print(f"speed-4096-eagle2 (EAGLE-2, 60-token trees): {s2['steps']} steps, "
              f"{s2['mean_accepted_tokens']:.2f} tokens/step")
        print(f"  fast path     : median {me:.3f} s = {me / n * 1e3:.3f} ms/request  (runs: {', '.join(f'{x:.2f}' for x in e2)})")
        print(f"  target 0.5 ms/request: {'met' if me / n * 1e3 <= 0.5 else 'MISSED'}")
        if args.scaling:
            print("scaling (one run each):")
            for size in (4096, 16384, 50000, 100000):
                wall, rss = one(with_requests(size, tmp), tmp / f"s{size}")
                print(f"  {size:>7} requests: {wall:7.2f} s  {wall / size * 1e3:.3f} ms/request  peak RSS {rss:.0f} MB")


if __name__ == "__main__":
    main()
