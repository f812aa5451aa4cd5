"""Where the rest of a step goes (validation.split's "rest": the step's clock less its drafting
and its target forward), by part, in the family's engine: `none`, `ngram` and `draft` at one
concurrency, rounds alternated. Each step of every sequence decoding is timed in four parts
around EngineRun's own calls: scheduling less the planner's call (`Scheduler.schedule` less
TimedPlanner's time), packing (`StepBatch.pack`), the target forward (`Model.forward`, as split
times it) and verification (`EngineRun._verify`, every group's call), plus the remainder of
`_forward_verify` (building the queries, grouping, the results back as lists).

python validation/results/cpu-epyc-zen4/0.56.0/rest_parts.py CONCURRENCY ROUNDS [by-drafted]

With `by-drafted` (0.56.1) each scheme's steps are summarized apart by how many of their
sequences drafted (d: an `ngram` step whose lookup found no match has d = 0, as a `none` step),
every count of 20 steps or more."""
import statistics
import sys
import time
from dataclasses import replace

import torch

from engine.checkpoint import resolve
from engine.host_memory import retain_freed_memory
from engine.model import StepBatch
from engine.runner import EngineRun
from sim.spec import load_trace
from sim.workload import make_requests

torch.set_num_threads(1)
retain_freed_memory()
conc = int(sys.argv[1]) if len(sys.argv) > 1 else 1
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
by_drafted = len(sys.argv) > 3 and sys.argv[3] == "by-drafted"
trace = load_trace("validation/results/cpu-epyc-zen4/0.56.0/family-split-ngram.yaml")
source = resolve(trace)
model = source.build()
drafters = source.drafters_for(model, trace.speculation)
ran = replace(trace, model=source.spec)
workload = make_requests(trace.workload, trace.seed, conc)
clock = time.perf_counter


def measure(scheme):
    run = EngineRun(ran, scheme, workload, model, drafters=drafters)
    steps, cur = [], {}
    sched, fwd, verify, fv = run.sched.schedule, model.forward, run._verify, run._forward_verify
    pack = StepBatch.pack

    def timed(name, fn):
        def call(*a, **k):
            t0 = clock()
            try:
                return fn(*a, **k)
            finally:
                cur[name] = cur.get(name, 0.0) + clock() - t0
        return call

    def schedule(now):
        cur.clear()
        out = timed("schedule", sched)(now)
        cur["draft_in_schedule"] = run.timed.last if run.timed is not None else 0.0
        return out

    def forward_verify(batch):
        out = timed("forward_verify", fv)(batch)
        if all(q == max(batch.query) for q in batch.query) and len(batch.seqs) == conc and not any(
                getattr(batch, "prefill", [0]) or [0]):
            steps.append(dict(cur, q=max(batch.query), d=sum(1 for t in batch.trees if len(t)), drafting=run.timed.last if run.timed is not None else 0.0))
        return out

    run.sched.schedule, run._forward_verify, run._verify = schedule, forward_verify, timed("verify", verify)
    model.forward = timed("forward", fwd)
    StepBatch.pack = staticmethod(timed("pack", pack))
    try:
        run.run()
    finally:
        model.forward = fwd
        StepBatch.pack = staticmethod(pack)
    return steps


def summary(steps, d=None):
    q = statistics.mode(s["q"] for s in steps)
    kept = [s for s in steps if s["q"] == q and d in (None, s["d"])][3:]
    med = {k: statistics.median(s.get(k, 0.0) for s in kept) * 1e3 for k in
           ("schedule", "draft_in_schedule", "pack", "forward", "verify", "forward_verify", "drafting")}
    med["fv_rest"] = statistics.median(s["forward_verify"] - s.get("pack", 0) - s["forward"] - s.get("verify", 0)
                                       for s in kept) * 1e3
    med["schedule_less_planner"] = statistics.median(s["schedule"] - s["draft_in_schedule"] for s in kept) * 1e3
    return q if d is None else f"{q} d={d}", len(kept), med


measure(trace.speculation[0])  # first-call costs
got = {s.label: [] for s in trace.speculation}
for r in range(rounds):
    for scheme in (trace.speculation if r % 2 == 0 else list(reversed(trace.speculation))):
        steps = measure(scheme)
        counts = sorted(d for d in {s["d"] for s in steps} if sum(s["d"] == d for s in steps) >= 23) if by_drafted else [None]
        got[scheme.label].extend(summary(steps, d) for d in counts)
print(f"# concurrency {conc}, {rounds} rounds; per round: q, steps kept, medians (ms)")
for label, rs in got.items():
    for q, n, m in rs:
        print(f"{label:6s} q={q:>2} n={n:4d} schedule-planner {m['schedule_less_planner']:.3f} pack {m['pack']:.3f} "
              f"verify {m['verify']:.3f} fv-rest {m['fv_rest']:.3f} | forward {m['forward']:.3f} drafting {m['drafting']:.3f}")
