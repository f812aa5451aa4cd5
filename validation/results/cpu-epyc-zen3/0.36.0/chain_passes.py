"""The chain drafters' later passes per sequence, engine against simulator (2026-12-05, 0.36.0).
From the repository root with the project's environment, alone (2 cores):

  python validation/results/cpu-epyc-zen3/0.36.0/chain_passes.py SECONDS PROFILE [LO,HI]

The trained family's EAGLE head drafting chains of 1 and 5 (e1, e5) and its MTP modules at
depths 1 and 2 (mtp1, mtp2), each in engine runs at concurrency 1 (2 requests) and 16 (16
requests) of traces/family-schemes.yaml's workload, cycle after cycle for SECONDS: per run the
median drafting time of the decode steps with every sequence in them. Per cycle, a drafter's
growth per added sequence per extra pass, [(deep at 16 - deep at 1) - (shallow at 16 - shallow
at 1)] / 15 / extra passes (4 for EAGLE, 1 for MTP), and the same of the first pass (the shallow
one's growth per sequence); the simulator's the same from its runs of the same workloads on
PROFILE (a measured hardware profile), seed 0 draw.
"""
from __future__ import annotations

import statistics as st
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch
import yaml

ROOT = Path(__file__).resolve().parents[4]
FAMILY = ROOT / "traces" / "family-schemes.yaml"
ENTRIES = {"e1": {"scheme": "eagle", "depth": 1, "acc": "eagle"}, "e5": {"scheme": "eagle", "depth": 5, "acc": "eagle"},
           "mtp1": {"scheme": "mtp", "depth": 1, "acc": "mtp1"}, "mtp2": {"scheme": "mtp", "depth": 2, "acc": "mtp2"}}
PAIRS = {"eagle": ("e1", "e5", 4), "mtp": ("mtp1", "mtp2", 1)}  # shallow, deep, extra passes
CONCS = (1, 16)  # LO,HI: the pair of concurrencies (0.37.0 ran 1,4 too)


def load(profile: Path):
    from sim.spec import load_trace
    doc = yaml.safe_load(FAMILY.read_text())
    doc["hardware"] = str(profile.resolve())
    doc["speculation"] = [{"scheme": e["scheme"], "depth": e["depth"], "label": lab,
                           "acceptance": {"measured": str(FAMILY.parent / "measured" / "tiny" / f"{e['acc']}-code-t0.json")}}
                          for lab, e in ENTRIES.items()]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t.yaml"
        path.write_text(yaml.safe_dump(doc))
        return load_trace(path)


def workload(trace, conc):
    from sim.workload import make_requests
    wl = replace(trace.workload, requests=max(2, conc), arrival=replace(trace.workload.arrival, concurrency=conc))
    return make_requests(wl, trace.seed)


def drafting(result, conc) -> float:
    c = result.steps.columns()
    keep = (c["prefill_tokens"] == 0) & (c["batch_size"] == conc)
    return float(np.median(c["draft_time"][keep]))


def growth(t: dict, concs=CONCS) -> dict:
    """{drafter: (first pass per sequence, each later pass per sequence)} from {(label, conc): s}."""
    lo, hi = concs
    out = {}
    for name, (a, b, extra) in PAIRS.items():
        first = (t[(a, hi)] - t[(a, lo)]) / (hi - lo)
        later = ((t[(b, hi)] - t[(b, lo)]) - (t[(a, hi)] - t[(a, lo)])) / (hi - lo) / extra
        out[name] = (first, later)
    return out


def main(seconds: float, profile: Path, concs=CONCS) -> None:
    from engine.cli import build
    from engine.runner import run_scheme
    from sim.simulator import simulate
    trace = load(profile)
    source, model, drafters = build(trace)
    ran = replace(trace, model=source.spec)
    sim = {(s.label, c): drafting(simulate(trace, s, workload(trace, c)), c) for s in trace.speculation for c in concs}
    cycles = []
    end = time.time() + seconds
    while time.time() < end:
        t = {}
        for s in trace.speculation:
            for c in concs:
                res = run_scheme(ran, s, workload(trace, c), model, prompts=source.prompts, drafters=drafters)
                t[(s.label, c)] = drafting(res.result, c)
        cycles.append(t)
    print(f"{len(cycles)} cycles, {seconds:.0f} s, profile {profile}")
    print("median drafting a step, ms: " + ", ".join(
        f"{lab}@{c} {st.median(x[(lab, c)] for x in cycles) * 1e3:.2f} (sim {sim[(lab, c)] * 1e3:.2f})"
        for lab in ENTRIES for c in concs))
    gs = [growth(x, concs) for x in cycles]
    g_sim = growth(sim, concs)
    for name in PAIRS:
        for i, part in enumerate(("first pass", "each later pass")):
            v = [g[name][i] * 1e6 for g in gs]
            q = np.quantile(v, [0.25, 0.75])
            print(f"  {name:6} {part:15} per added sequence: engine {st.median(v):6.1f} us ({q[0]:.1f}-{q[1]:.1f}), "
                  f"simulator {g_sim[name][i] * 1e6:6.1f} us")


if __name__ == "__main__":
    torch.set_num_threads(1)
    sys.path.insert(0, str(ROOT))
    main(float(sys.argv[1]), Path(sys.argv[2]), tuple(int(x) for x in sys.argv[3].split(",")) if len(sys.argv) > 3 else CONCS)
