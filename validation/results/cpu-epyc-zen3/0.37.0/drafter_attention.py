"""What a drafter's pass spends at 1 and at more sequences, and what its attention calls cost by
the rows each sequence brings (2026-12-05, 0.37.0). From the repository root with the project's
environment, alone (2 cores):

  python validation/results/cpu-epyc-zen3/0.37.0/drafter_attention.py calls SECONDS LABEL CONC
  python validation/results/cpu-epyc-zen3/0.37.0/drafter_attention.py parts SECONDS LABEL LO,HI
  python validation/results/cpu-epyc-zen3/0.37.0/drafter_attention.py price PROFILE

`calls`: engine runs of the family's scheme LABEL at concurrency CONC (max(4, CONC) requests),
again and again for SECONDS; every paged_attention call (kernels/attention.py's reference) of
the target's and of the drafter's forwards timed, and grouped by whose it was and by the query
rows each sequence had (sorted): the most frequent patterns with their median time. A batch in
which some sequence has one row and others several runs the fused call and a call of its own
for the single rows.

`parts`: pairs of engine runs of LABEL at LO and HI (an MTP or EAGLE drafter), cycle after
cycle for SECONDS; each decode step's drafting (the drafter's `draft` call), in steps whose
passes have under 20 rows a sequence (no prompt's catch-up), split into its forwards' matrix
products (`@`), attention, norms, KV stores and the rest of the forwards; the products outside
the forwards (the fused input's projection); the selection (`pick`); and the rest (the
drafter's own Python). Per cycle the median step's parts at LO and HI, then medians over the
cycles, and each part's growth per added sequence.

`price`: the simulator's price on PROFILE (a measured hardware profile) of one MTP module's
pass as `parts` met it in steady steps at 1, 4 and 16 sequences (2, 7 and 28 rows, all but one,
one and four sequences with two rows; context 170 a sequence), split as the cost model adds it
up: everything but attention (`ForwardCost._token_part`: products, elementwise passes,
launches, LM head), attention (the rest of the forward's price), the fused input's projection,
and the drafter's host time; with 0.37.0's attention paths and without them (0.36.0).
"""
from __future__ import annotations

import collections
import importlib.util
import statistics as st
import sys
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
spec = importlib.util.spec_from_file_location("host_regimes", HERE.parent / "0.35.0" / "host_regimes.py")
hr = importlib.util.module_from_spec(spec)
spec.loader.exec_module(hr)
spec = importlib.util.spec_from_file_location("insitu", HERE.parent / "0.36.0" / "insitu.py")
insitu = importlib.util.module_from_spec(spec)
spec.loader.exec_module(insitu)

PARTS = ("total", "fwd", "mm_fwd", "attn", "norm", "store", "fwd_rest", "mm_other", "pick", "rest")
clock = time.perf_counter


def hooked_forward(model, on_call, wrap_ops):
    """Replaces Model.forward: `on_call(is_target)` before each pass, and the pass's ops wrapped
    by `wrap_ops(ops, is_target)` (an engine.ops-like tuple) for its duration."""
    import engine.model as em
    forward = em.Model.forward

    def fwd(self, step, cache, inputs=None):
        target = self is model
        on_call(target, step)
        saved = (self.ops, self.ops_unchecked)
        self.ops, self.ops_unchecked = wrap_ops(saved[0], target), wrap_ops(saved[1], target)
        try:
            return forward(self, step, cache, inputs)
        finally:
            self.ops, self.ops_unchecked = saved
    em.Model.forward = fwd


def calls(seconds: float, label: str, conc: int) -> None:
    trace, model, drafters, prompts = hr.family([label], requests=max(4, conc))
    rec = collections.defaultdict(list)
    who = {"v": None}

    def timed(fn):
        def w(*a, **k):
            t0 = clock()
            r = fn(*a, **k)
            dt = clock() - t0
            rows = tuple(sorted(torch.bincount(a[5].long()).tolist()))  # a[5]: q_seq (N,)
            rec[(who["v"], rows)].append(dt)
            return r
        return w

    hooked_forward(model, lambda target, step: who.update(v="target" if target else "drafter"),
                   lambda o, target: type(o)(o.name, o.store_kv, timed(o.paged_attention), o.rms_norm))
    scheme = trace.speculation[0]
    n = len(insitu.cycles(seconds, lambda: hr.run_at(trace, scheme, conc, model, drafters, prompts)))
    print(f"{label} at {conc}: {n} runs, {seconds:.0f} s; paged_attention calls by the rows of each sequence")
    for (whose, rows), v in sorted(rec.items(), key=lambda kv: -len(kv[1]))[:14]:
        shown = str(rows) if len(rows) <= 8 else f"{len(rows)} sequences, {sum(rows)} rows"
        print(f"  {whose:8} {shown:28} {len(v):6} calls, median {st.median(v) * 1e6:7.1f} us")


def parts(seconds: float, label: str, concs: tuple[int, int]) -> None:
    import engine.drafting.base as db
    import engine.drafting.eagle as de
    import engine.drafting.mtp as dm
    lo, hi = concs
    trace, model, drafters, prompts = hr.family([label], requests=hi)
    acc = collections.defaultdict(float)
    state = {"on": False, "fwd": False}
    recs = []

    def timed(name, fn):
        def w(*a, **k):
            if not state["on"]:
                return fn(*a, **k)
            t0 = clock()
            r = fn(*a, **k)
            acc[name] += clock() - t0
            return r
        return w

    matmul = torch.Tensor.__matmul__

    def mm(a, b):
        if not state["on"]:
            return matmul(a, b)
        t0 = clock()
        r = matmul(a, b)
        acc["mm_fwd" if state["fwd"] else "mm_other"] += clock() - t0
        return r
    torch.Tensor.__matmul__ = mm

    import engine.model as em
    forward = em.Model.forward

    def fwd(self, step, cache, inputs=None):
        if self is model or not state["on"]:
            return forward(self, step, cache, inputs)
        saved = (self.ops, self.ops_unchecked)
        wrap = lambda o: type(o)(o.name, timed("store", o.store_kv), timed("attn", o.paged_attention),  # noqa: E731
                                 timed("norm", o.rms_norm))
        self.ops, self.ops_unchecked = wrap(saved[0]), wrap(saved[1])
        state["fwd"] = True
        t0 = clock()
        try:
            return forward(self, step, cache, inputs)
        finally:
            acc["fwd"] += clock() - t0
            state["fwd"] = False
            self.ops, self.ops_unchecked = saved
            acc["rows"] += step.num_tokens
    em.Model.forward = fwd

    def hook(cls):
        draft = cls.draft

        def drafting(self, seqs, ks):
            acc.clear()
            state["on"] = True
            t0 = clock()
            r = draft(self, seqs, ks)
            total = clock() - t0
            state["on"] = False
            recs.append(dict(acc, total=total, n=len(seqs)))
            return r
        cls.draft = drafting
    hook(dm.MTPDrafter)
    hook(de.EagleDrafter)
    pick = db.ModelDrafter.pick
    db.ModelDrafter.pick = lambda self, logits: timed("pick", pick)(self, logits)

    scheme = trace.speculation[0]

    def once():
        out = {}
        for c in concs:
            recs.clear()
            hr.run_at(trace, scheme, c, model, drafters, prompts)
            rs = [r for r in recs if r["n"] == c and r.get("rows", 0) < 20 * c]
            for r in rs:
                r["fwd_rest"] = r.get("fwd", 0) - sum(r.get(k, 0) for k in ("mm_fwd", "attn", "norm", "store"))
                r["rest"] = r["total"] - r.get("fwd", 0) - r.get("mm_other", 0) - r.get("pick", 0)
            out[c] = {k: st.median(r.get(k, 0) for r in rs) for k in PARTS + ("rows",)}
        return out
    cyc = insitu.cycles(seconds, once)
    print(f"{label}: {len(cyc)} cycles, {seconds:.0f} s; rows a step: {st.median(c[lo]['rows'] for c in cyc):.0f} "
          f"at {lo}, {st.median(c[hi]['rows'] for c in cyc):.0f} at {hi}")
    for k in PARTS:
        a, b = st.median(c[lo][k] for c in cyc), st.median(c[hi][k] for c in cyc)
        g = st.median((c[hi][k] - c[lo][k]) / (hi - lo) for c in cyc)
        print(f"  {k:8} {a * 1e3:7.3f} ms at {lo:2}, {b * 1e3:7.3f} ms at {hi:2}, per added sequence {g * 1e6:7.1f} us")


def price(profile: Path) -> None:
    from sim.cost import Work
    from sim.drafters import PassPricer, drafter_host_time, linear_cost, mtp_module
    trace = trace_at(profile)
    hw = trace.hardware.drafter()
    spec = mtp_module(trace.model)
    pricer = PassPricer(spec, hw, 1, fuse_input=True, catch_up=True)
    fwd, ctx = pricer.fwd, 170
    shapes = {1: (2, 1), 4: (7, 3), 16: (28, 12)}  # sequences: (rows, sequences with two)
    print(f"one MTP module's pass, context {ctx} a sequence, profile {profile}")
    for paths in (True, False):
        got = {}
        for n, (rows, several) in shapes.items():
            kv = n * ctx
            extra = pricer.paths(0, n, rows, several if paths else 0, kv)
            full = fwd(Work(rows, n, kv * max(1, rows // n), kv, n, **extra)).time
            token = fwd._token_part(rows, n)[0]
            fc = linear_cost(2 * spec.hidden, spec.hidden, rows, spec, hw, 1).time
            host = drafter_host_time(hw, n, [rows], catch_up=True)
            got[n] = {"total": full + fc + host, "token part": token, "attention": full - token, "fc": fc, "host": host}
        print("0.37.0 (attention paths)" if paths else "0.36.0 (none)")
        for k in got[1]:
            print(f"  {k:10} " + ", ".join(f"{got[n][k] * 1e3:6.3f} ms at {n:2}" for n in shapes)
                  + f"; per added sequence {(got[4][k] - got[1][k]) / 3 * 1e6:6.1f} us to 4, "
                    f"{(got[16][k] - got[1][k]) / 15 * 1e6:6.1f} us to 16")


def trace_at(profile: Path):
    """The family's trace with its hardware read from `profile`."""
    import tempfile

    import yaml

    from sim.spec import load_trace
    doc = yaml.safe_load(hr.FAMILY.read_text())
    doc["hardware"] = str(profile.resolve())
    doc["speculation"] = [{"scheme": "none"}]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t.yaml"
        path.write_text(yaml.safe_dump(doc))
        return load_trace(path)


if __name__ == "__main__":
    torch.set_num_threads(1)
    sys.path.insert(0, str(hr.ROOT))
    if sys.argv[1] == "price":
        price(Path(sys.argv[2]))
        sys.exit(0)
    what, secs, label = sys.argv[1], float(sys.argv[2]), sys.argv[3]
    if what == "calls":
        calls(secs, label, int(sys.argv[4]))
    else:
        parts(secs, label, tuple(int(x) for x in sys.argv[4].split(",")))
