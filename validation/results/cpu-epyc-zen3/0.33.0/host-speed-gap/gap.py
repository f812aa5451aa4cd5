"""Is the host slower during the engine's runs, or does the engine's work slow the speed loop?

One process, the family's `none` at concurrency 1 (4 requests x 32 tokens), ROUNDS rounds of:
the speed loop after a 0.3 s pause (idle); a run with the loop after every step as compare
times it (validation.timing.settled_reference: one untimed loop, one timed; weighted by the
steps' durations: EngineResult.reference_speed); the loop right after the run as compare's
probes read it (validation.host_speed.reference_speed: the mean of 16 after one untimed);
the calibration's host-time forwards for about as long as the run, then that reading again.
Prints each reading over the round's idle one, medians over the rounds. Then the same for the
host-time forward itself (a 1-layer hidden-64 forward, the mean of 10 calls after one untimed):
its speed right after the run and right after the forwards, over its speed after a pause.

    python gap.py [ROUNDS]
"""
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[5]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from engine.cli import build  # noqa: E402
from engine.runner import run_scheme  # noqa: E402
from sim.spec import load_trace  # noqa: E402
from sim.workload import make_requests  # noqa: E402
from validation.host_probes import forward_probe  # noqa: E402
from validation.host_speed import reference_speed  # noqa: E402
from validation.timing import settled_reference  # noqa: E402

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 12
torch.set_num_threads(1)
trace = load_trace(ROOT / "traces" / "family-schemes.yaml")
trace = replace(trace, speculation=trace.speculation[:1],
                workload=replace(trace.workload, requests=4,
                                 output_tokens=replace(trace.workload.output_tokens, value=32)))
source, model, drafters = build(trace)
ran = replace(trace, model=source.spec)
wl = make_requests(trace.workload, trace.seed, 1)
probe = forward_probe(1, "cpu")
def forward_speed() -> float:
    probe()
    t0 = time.perf_counter()
    for _ in range(10):
        probe()
    return 10 / (time.perf_counter() - t0)


rows, fwd = [], []
for r in range(rounds + 1):
    time.sleep(0.3)
    idle_fwd = forward_speed()
    time.sleep(0.3)
    idle = reference_speed()
    t0 = time.perf_counter()
    res = run_scheme(ran, trace.speculation[0], wl, model, prompts=source.prompts, drafters=drafters,
                     reference=settled_reference)
    run_s = time.perf_counter() - t0
    after_run = reference_speed()
    run_scheme(ran, trace.speculation[0], wl, model, prompts=source.prompts, drafters=drafters)
    fwd_after_run = forward_speed()
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < min(run_s, 2.0):
        probe()
    after_probes = reference_speed()
    while time.perf_counter() - t0 < min(2 * run_s, 4.0):
        probe()
    fwd_after_probes = forward_speed()
    if r:  # the first round warms up
        fwd.append((fwd_after_run / idle_fwd, fwd_after_probes / idle_fwd))
        rows.append((res.reference_speed / idle, after_run / idle, after_probes / idle))
        print(f"round {r}: during run {rows[-1][0]:.3f}, after run {rows[-1][1]:.3f}, after probes {rows[-1][2]:.3f} "
              f"(of idle; run {run_s:.2f} s)", flush=True)
med = [statistics.median(x[i] for x in rows) for i in range(3)]
print(f"median over {len(rows)} rounds, each over its idle reading: during the engine's run {med[0]:.3f}, "
      f"right after it {med[1]:.3f}, right after the host-time forwards {med[2]:.3f}")
f_med = [statistics.median(x[i] for x in fwd) for i in range(2)]
print(f"the host-time forward's own speed over its speed after a pause, medians: right after the engine's run "
      f"{f_med[0]:.3f}, right after the forwards {f_med[1]:.3f} (ratio {f_med[1] / f_med[0]:.3f})")
