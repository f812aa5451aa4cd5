"""Workload generation speed: the two targets the workload tests used to time, medians over repeats.

    python bench/bench_workload.py [--repeats 5]

1. make_requests on 100k requests (gamma arrivals cv 2, lognormal prompts, empirical outputs).
   Target: under 2 s (about 0.25 s on the development machine).
2. read_azure on the whole conversation trace (../shared/data/azure-llm-2023). Target: under 1 s.
Prints each median with its target and their ratio (median / target: under 1 meets it).
"""
from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from sim.spec import ArrivalSpec, LengthDist, WorkloadSpec
from sim.workload import make_requests, read_azure

CONV = Path(__file__).resolve().parents[2] / "shared" / "data" / "azure-llm-2023" / "AzureLLMInferenceTrace_conv.csv"
SPEC = WorkloadSpec(requests=100_000, arrival=ArrivalSpec("gamma", rate_per_s=50.0, cv=2.0),
                    prompt_tokens=LengthDist("lognormal", median=1000, sigma=1.0, max=32000),
                    output_tokens=LengthDist("empirical", values=(10, 100, 1000), weights=(1, 2, 1)))


def median_s(fn, repeats: int) -> float:
    """Median wall seconds of `repeats` calls of fn, after one untimed warm-up call."""
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    rows = [("make_requests, 100k requests", lambda: make_requests(SPEC, 0), 2.0)]
    if CONV.is_file():
        rows.append(("read_azure, conversation trace", lambda: read_azure(CONV, 0, 10**9), 1.0))
    else:
        print(f"{CONV} not found: the Azure read is skipped")
    for name, fn, target in rows:
        m = median_s(fn, args.repeats)
        print(f"{name:34s} median {m:7.3f} s  target {target:.1f} s  ratio {m / target:.2f}")


if __name__ == "__main__":
    main()
