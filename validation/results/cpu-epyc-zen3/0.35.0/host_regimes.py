"""The host's speed regimes and what they do to the family's step times (2026-12-04, 0.35.0).

Run from the repository root with the project's environment, one at a time (2 cores):

  python validation/results/cpu-epyc-zen3/0.35.0/host_regimes.py paired SECONDS
      every scheme of traces/family-schemes.yaml, 4-request engine runs at concurrency 1 and 4
      back to back, cycle after cycle: per cycle the median decode step (drafting included) at
      batch 4 over at batch 1, and drafting's alone; medians and ranges over the cycles.
  python .../host_regimes.py parts SECONDS LABEL
      the same pairs for one scheme, the target's forward in a decode step timed by part:
      matrix products (`@`), paged attention, norms, KV stores and the rest.
  python .../host_regimes.py refs SECONDS
      `none` and `draft` at concurrency 1, each 4-request run between two readings of candidate
      host-speed references (the interpreter loop the comparisons use, the family target's
      products at one row, a 64 MB copy, 50 small torch calls): how well each follows the
      engine's median step (correlation of logs, the residual's standard deviation).
  python .../host_regimes.py probe
      the calibration's warm matmul probe (validation.probes.matmul_probes, steady_time after
      5 ms of host work) on the family target's matrices at 1 and 4 rows, now: to set beside a
      profile's gemm_shapes_warm.
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
PEAK = 58.34e9  # the 0.34.0 profile's fp32 GEMM peak (cpu-epyc-zen3/0.34.0), for fractions


def family(labels=None, requests: int = 4):
    """(trace, model, drafters, prompts) of the family's trace, its schemes `labels` (all: None),
    `requests` requests, built once."""
    from engine.cli import build
    from sim.spec import load_trace
    doc = yaml.safe_load(FAMILY.read_text())
    doc["speculation"] = [s for s in doc["speculation"] if labels is None or s.get("label", s["scheme"]) in labels]
    for s in doc["speculation"]:
        if "acceptance" in s:
            s["acceptance"]["measured"] = str(FAMILY.parent / s["acceptance"]["measured"])
    doc["workload"]["requests"] = requests
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t.yaml"
        path.write_text(yaml.safe_dump(doc))
        trace = load_trace(path)
    source, model, drafters = build(trace)
    return replace(trace, model=source.spec), model, drafters, source.prompts


def run_at(trace, scheme, conc, model, drafters, prompts, reference=None):
    """One engine run of `scheme` at concurrency `conc`: its decode steps at batch `conc` as
    (durations, drafting times). `reference`: the engine's call after every step (compare's
    validation.timing.settled_reference), none by default."""
    from engine.runner import run_scheme
    from sim.workload import make_requests
    wl = replace(trace.workload, arrival=replace(trace.workload.arrival, concurrency=conc))
    res = run_scheme(trace, scheme, make_requests(wl, trace.seed), model, prompts=prompts, drafters=drafters,
                     reference=reference)
    c = res.result.steps.columns()
    keep = (c["prefill_tokens"] == 0) & (c["batch_size"] == conc)
    return c["duration"][keep].tolist(), c["draft_time"][keep].tolist()


def paired(seconds: float) -> None:
    trace, model, drafters, prompts = family()
    cycles = []
    end = time.time() + seconds
    while time.time() < end:
        cyc = {}
        for scheme in trace.speculation:
            for conc in (1, 4):
                d, dr = run_at(trace, scheme, conc, model, drafters, prompts)
                cyc[(scheme.label, conc)] = (st.median(d), st.median(dr))
        cycles.append(cyc)
    print(f"{len(cycles)} cycles of 4-request runs at 1 and 4, {seconds:.0f} s")
    for scheme in trace.speculation:
        lab = scheme.label
        step = [c[(lab, 4)][0] / c[(lab, 1)][0] for c in cycles]
        dr = [c[(lab, 4)][1] / c[(lab, 1)][1] for c in cycles if c[(lab, 1)][1] > 0]
        q = np.quantile(step, [0.25, 0.75])
        print(f"{lab:10} batch 1 step {st.median(c[(lab, 1)][0] for c in cycles) * 1e3:6.2f} ms; step 4/1 {st.median(step):.3f} "
              f"(quartiles {q[0]:.3f}-{q[1]:.3f})" + (f"; drafting 4/1 {st.median(dr):.3f}" if dr else ""))


def parts(seconds: float, label: str) -> None:
    import engine.model as em
    trace, model, drafters, prompts = family([label])
    clock = time.perf_counter
    acc: dict[str, float] = {}
    on = [False]

    def timed(name, fn):
        def wrapped(*a, **k):
            if not on[0]:
                return fn(*a, **k)
            t0 = clock()
            r = fn(*a, **k)
            acc[name] = acc.get(name, 0.0) + clock() - t0
            return r
        return wrapped

    torch.Tensor.__matmul__ = timed("products", torch.Tensor.__matmul__)
    recs: list[dict] = []
    forward = em.Model.forward

    def timed_forward(self, step, cache, inputs=None):
        if self is not model or step.num_tokens >= 64:  # the target's decode passes only
            return forward(self, step, cache, inputs)
        acc.clear()
        on[0] = True
        saved = self.ops, self.ops_unchecked
        wrap = lambda o: type(o)(o.name, timed("store", o.store_kv), timed("attention", o.paged_attention),  # noqa: E731
                                 timed("norms", o.rms_norm))
        self.ops, self.ops_unchecked = wrap(saved[0]), wrap(saved[1])
        t0 = clock()
        r = forward(self, step, cache, inputs)
        total = clock() - t0
        self.ops, self.ops_unchecked = saved
        on[0] = False
        recs.append(dict(acc, forward=total, seqs=int(step.kv_lens.numel())))
        return r

    em.Model.forward = timed_forward
    names = ("forward", "products", "attention", "norms", "store", "rest")
    cycles = []
    end = time.time() + seconds
    while time.time() < end:
        cyc = {}
        for conc in (1, 4):
            recs.clear()
            run_at(trace, trace.speculation[0], conc, model, drafters, prompts)
            rs = [r for r in recs if r["seqs"] == conc]
            for r in rs:
                r["rest"] = r["forward"] - sum(r.get(k, 0.0) for k in names[1:5])
            cyc[conc] = {k: st.median(r.get(k, 0.0) for r in rs) for k in names}
        cycles.append(cyc)
    print(f"{label}: the target's decode forward by part, {len(cycles)} pairs of 4-request runs at 1 and 4")
    for k in names:
        b1, b4 = (st.median(c[n][k] for c in cycles) for n in (1, 4))
        grow = st.median((c[4][k] - c[1][k]) / 3 for c in cycles)
        print(f"  {k:9} batch 1 {b1 * 1e3:6.3f} ms, batch 4 {b4 * 1e3:6.3f} ms, per added sequence {grow * 1e3:6.3f} ms")


def refs(seconds: float) -> None:
    from validation.timing import host_reference
    trace, model, drafters, prompts = family(["none", "draft"])
    shapes = [(256, 512), (256, 256), (256, 1536), (768, 256)] * 4 + [(256, 4096)]  # the target's, 17 MB
    ws = [torch.randn(n, k) for k, n in shapes]
    xs = {k: torch.randn(1, k) for k, _ in shapes}
    a, b = torch.empty(16 << 20), torch.randn(16 << 20)
    one, small = torch.ones(1), torch.ones(8, 8)

    def dispatch():
        for _ in range(50):
            torch.add(one, one)
            small.sum()

    candidates = {"interpreter": lambda: host_reference(200), "products": lambda: [xs[w.shape[1]] @ w.T for w in ws],
                  "copy": lambda: a.copy_(b), "dispatch": dispatch}

    def reading():
        out = {}
        for name, fn in candidates.items():
            fn()
            times = []
            for _ in range(3):
                t0 = time.perf_counter()
                fn()
                times.append(time.perf_counter() - t0)
            out[name] = st.median(times)
        return out

    follow_references(family_run=(trace, model, drafters, prompts), reading=reading, seconds=seconds)


def follow_references(family_run, reading, seconds: float) -> None:
    """Each scheme of `family_run` (trace, model, drafters, prompts) in 4-request runs at
    concurrency 1, again and again for `seconds`, each run between two `reading()`s ({name:
    seconds a call}); per scheme how well each reading follows the run's median step (logs'
    spread, correlation, fitted slope, the residual's spread)."""
    trace, model, drafters, prompts = family_run
    rows: dict[str, list[tuple[float, dict]]] = {}
    end = time.time() + seconds
    while time.time() < end:
        for scheme in trace.speculation:
            before = reading()
            d, _ = run_at(trace, scheme, 1, model, drafters, prompts)
            after = reading()
            rows.setdefault(scheme.label, []).append((st.median(d), {k: (before[k] + after[k]) / 2 for k in before}))
    for label, rs in rows.items():
        y = np.log([s for s, _ in rs])
        print(f"{label} at 1: {len(rs)} runs, the engine's median step: sd of its log {y.std():.3f}")
        for name in rs[0][1]:
            x = np.log([r[name] for _, r in rs])
            fit = np.polyfit(x, y, 1)
            print(f"  {name:11} sd {x.std():.3f}, correlation {np.corrcoef(x, y)[0, 1]:+.2f}, slope {fit[0]:.2f}, "
                  f"residual sd {(y - np.polyval(fit, x)).std():.3f}")


def probe() -> None:
    from validation.probes import matmul_probes
    from validation.timing import host_gap, steady_time
    gap = host_gap(0.005)
    target = [(256, 512), (256, 256), (256, 1536), (768, 256), (256, 4096)]
    per_forward = {1: 0.0, 4: 0.0}
    for (kib, m), (fn, flops) in matmul_probes("cpu", target, [1, 4], pool_bytes=16 << 20).items():
        count = flops / (2 * m * kib * 256)
        t = steady_time(fn, "cpu", between=gap) / count
        per_forward[m] += t * (1 if kib == 4096 else 4)
        print(f"{kib:5} KiB at {m} rows: {t * 1e6:7.1f} us a matrix, {flops / count / t / PEAK:.4f} of {PEAK / 1e9:.1f} GFLOP/s")
    print("the target's products a forward: " + ", ".join(f"{t * 1e3:.2f} ms at {m} rows" for m, t in per_forward.items()))


if __name__ == "__main__":
    torch.set_num_threads(1)
    sys.path.insert(0, str(ROOT))
    cmd, *args = sys.argv[1:]
    {"paired": lambda: paired(float(args[0])), "parts": lambda: parts(float(args[0]), args[1]),
     "refs": lambda: refs(float(args[0])), "probe": probe}[cmd]()
