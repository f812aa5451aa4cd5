"""A model drafter's drafting part by part (MTP, EAGLE, a draft model), the engine's time against the simulator's price from a profile
measured in the same hour (2026-12-05, 0.39.0). Run from the repository root with the project's
environment, alone (2 cores), right after a comparison that calibrated (its DIR):

  python validation/results/cpu-epyc-zen3/0.39.0/drafter_parts.py SECONDS DIR [LABEL,...] [CONCS]

Cycle after cycle, 4-request engine runs (CONCS requests at most) of each LABEL (default
`mtp1,mtp2`) at each concurrency of CONCS (default 1,4), every decode step's drafting timed as
compare reads it (engine.runner.TimedPlanner's `plan` and hand-offs) and split into:
- `mm`: the drafter's matrix products inside its forwards but the LM head's (`@` on a matrix of
  its layers); `lm`: the LM head's product; `fwd-rest`: the rest of the forwards
  (norms, rotary, attention, the pass's set-up);
- `inputs`: an MTP module's or EAGLE head's input projection (engine.drafting.heads.FeatureHead.inputs:
  two norms, a concatenation and the 2h -> h product);
- `pick`: the draft token out of the logits (argmax at temperature 0), `topk`: the ranked
  candidates (Tensor.topk);
- `host`: the rest of the drafting (the drafter's bookkeeping and packing, plan, hand-offs).
Each pass's shape is recorded (query rows, LM-head rows, sequences with several rows, Σ context)
and priced with DIR/measured-hardware.yaml on the trace DIR/sim-trace.yaml describes, through
the cost model's own parts (sim.cost.ForwardCost, sim.drafters): `mm` against the layer's
products on the measured curves, `lm` the LM head's, `fwd-rest` against launches, elementwise
passes, attention and its paths, `inputs` against the fused projection (sim.drafters.linear_cost,
a product and a launch), `pick`+`topk` against the LM-head rows' draft_logit_s a logit, `host`
against sim.drafters.drafter_host_time (pass_overhead_s a pass, draft_seq_s a sequence). Per
label and concurrency, over the steps at the full batch without a prefill in or right before them
(ordinary steps): each part's median a step, the engine's and the price's, and their ratio.
"""
from __future__ import annotations

import statistics as st
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "0.35.0"))
from host_regimes import family  # noqa: E402

ENGINE = ("mm", "lm", "fwd-rest", "inputs", "pick", "topk", "host")


def profile_trace(root: Path):
    """The comparison's simulator trace with its profile and acceptance read from DIR."""
    from sim.spec import load_trace
    doc = yaml.safe_load((root / "sim-trace.yaml").read_text())
    doc["hardware"] = str(root / "measured-hardware.yaml")
    for s in doc["speculation"]:
        if "measured" in s.get("acceptance", {}):
            s["acceptance"]["measured"] = str(root / Path(s["acceptance"]["measured"]).name)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t.yaml"
        path.write_text(yaml.safe_dump(doc))
        return load_trace(path)


def price_parts(trace, label: str, passes: list[tuple[int, int, int, int]], n: int, reused: bool = False) -> dict:
    """The simulator's price of one step's drafting passes ((query rows, LM-head rows, sequences
    with several rows, Σ context) each) by the parts ENGINE names; `reused` (0.40.0's prices):
    each pass's products at the reuse factors its scheme's drafter pays (PassPricer.scale)."""
    from sim.cost import Work
    from sim.drafters import PassPricer, drafter_host_time, linear_cost
    scheme = next(s for s in trace.speculation if s.label == label)
    spec, fuse = scheme.drafter_spec()
    flags = dict(shared_lm=scheme.shared_lm, layers_again=scheme.layers_again) if reused else {}
    pr = PassPricer(spec, trace.hardware.drafter(), trace.tp, fuse_input=fuse, tree_levels=scheme.tree_levels,
                    catch_up=scheme.catch_up, **flags)
    fwd = pr.fwd
    out = dict.fromkeys(ENGINE, 0.0)
    for j, (tok, lm, several, ctx) in enumerate(passes):
        sc = pr.scale(j, tok, lm) if reused else (1.0, 1.0)
        mm = fwd.dense * fwd._compute(fwd.dense_flops_per_tok * tok, tok, "dense") * sc[0]
        head = fwd._compute(fwd.lm_flops_per_tok * lm, lm, "lm") * sc[1]
        whole = fwd(Work(tok, n, ctx * max(1, tok // max(n, 1)), ctx, lm, **pr.paths(j, n, tok, several, ctx - (j + 1) * n)),
                    sc).time
        logits = fwd.logit_pass * lm
        out["mm"] += mm
        out["lm"] += head
        out["fwd-rest"] += whole - mm - head - logits
        out["pick"] += logits  # pick and top-k together: the LM-head rows' draft_logit_s
        if fuse:
            out["inputs"] += linear_cost(2 * spec.hidden, spec.hidden, tok, spec, pr.hw, trace.tp).time
    out["host"] = drafter_host_time(pr.hw, n, [p[0] for p in passes], scheme.tree_levels, scheme.catch_up)
    return out


def main(seconds: float, root: Path, labels: list[str], concs: list[int]) -> None:
    import engine.drafting.base as db
    import engine.drafting.heads as dh
    import engine.model as em
    import engine.runner as er
    from engine.runner import run_scheme
    from sim.workload import make_requests
    from validation.draft_kinds import step_kinds
    from dataclasses import replace
    trace, model, drafters, prompts = family(labels, requests=max(4, *concs))
    priced = profile_trace(root.resolve())
    vocab = model.spec.vocab
    clock = time.perf_counter
    cur: dict = {}
    steps: list[dict] = []
    depth = {"draft": 0}

    def add(k, v):
        cur[k] = cur.get(k, 0.0) + v

    def timed(name, fn, only_in_draft=True):
        def wrapped(*a, **k):
            if only_in_draft and not depth["draft"]:
                return fn(*a, **k)
            t0 = clock()
            r = fn(*a, **k)
            add(name, clock() - t0)
            return r
        return wrapped

    plan, timing = er.TimedPlanner.plan, er.TimedPlanner.timing

    def t_plan(self, seqs):
        add("n", len(seqs))
        return timed("plan", plan, False)(self, seqs)

    er.TimedPlanner.plan = t_plan
    er.TimedPlanner.timing = timed("handoff", timing, False)
    patched: set = set()

    def d_plan(self, seqs, _plan=db.ModelDrafter.plan):
        cls = type(self)
        if cls not in patched:
            patched.add(cls)

            def draft(me, s, ks, _d=cls.draft):
                depth["draft"] += 1
                try:
                    return timed("draft", _d, False)(me, s, ks)
                finally:
                    depth["draft"] -= 1
            cls.draft = draft
        return _plan(self, seqs)
    db.ModelDrafter.plan = d_plan
    dh.FeatureHead.inputs = timed("inputs", dh.FeatureHead.inputs)
    db.ModelDrafter.pick = timed("pick", db.ModelDrafter.pick)
    torch.Tensor.topk = timed("topk", torch.Tensor.topk)
    inner_mm = torch.Tensor.__matmul__
    in_fwd = {"on": False}

    def matmul(a, b):
        if not in_fwd["on"]:
            return inner_mm(a, b)
        t0 = clock()
        r = inner_mm(a, b)
        add("lm" if b.shape[-1] == vocab else "mm", clock() - t0)
        return r
    torch.Tensor.__matmul__ = matmul
    forward = em.Model.forward

    def fwd(self, step, cache, inputs=None):
        starts = list(step.row_start) + [step.num_tokens]
        rows = [b - a for a, b in zip(starts, starts[1:])]  # query rows by sequence
        if self is model:  # a target pass ends the step's drafting: one entry a step
            steps.append(dict(cur, prefill=max(rows) >= 64))  # a chunk of a 128-token prompt (a tree: 33 rows)
            cur.clear()
            return forward(self, step, cache, inputs)
        several = sum(1 for r in rows if r > 1)
        cur.setdefault("passes", []).append((step.num_tokens, int(step.logit_rows.numel()), several,
                                             int(step.kv_lens.sum())))
        in_fwd["on"] = True
        t0 = clock()
        try:
            return forward(self, step, cache, inputs)
        finally:
            in_fwd["on"] = False
            add("fwd", clock() - t0)
    em.Model.forward = fwd

    def run(scheme, c):
        wl = replace(trace.workload, arrival=replace(trace.workload.arrival, concurrency=c))
        steps.clear()
        cur.clear()
        run_scheme(trace, scheme, make_requests(wl, trace.seed), model, prompts=prompts, drafters=drafters)
        admitted = step_kinds(np.array([s["prefill"] for s in steps]))
        return [s for s, adm in zip(steps, admitted) if not adm and s.get("n") == c and "draft" in s]

    results = {(s.label, c): [] for s in trace.speculation for c in concs}
    end = time.time() + seconds
    cycles = 0
    while time.time() < end:
        for scheme in trace.speculation:
            for c in concs:
                results[(scheme.label, c)].extend(run(scheme, c))
        cycles += 1
    print(f"{cycles} cycles, {seconds:.0f} s; profile {root}/measured-hardware.yaml")
    print("ms a step, median over the ordinary full-batch steps: engine / price (ratio price over engine)")
    print(f"{'':12}" + "".join(f"{p:>22}" for p in ENGINE + ("drafting",)))
    for scheme in trace.speculation:
        for c in concs:
            rows = results[(scheme.label, c)]
            if not rows:
                print(f"{scheme.label:5} at {c:2}: no ordinary step at the full batch")
                continue
            eng, pri = {p: [] for p in ENGINE + ("drafting",)}, {p: [] for p in ENGINE + ("drafting",)}
            for s in rows:
                e = {k: s.get(k, 0.0) for k in ("mm", "lm", "inputs", "pick", "topk")}
                e["fwd-rest"] = s.get("fwd", 0.0) - e["mm"] - e["lm"]
                drafting = s["plan"] + s.get("handoff", 0.0)
                e["host"] = drafting - s.get("fwd", 0.0) - e["inputs"] - e["pick"] - e["topk"]
                e["drafting"] = drafting
                p = price_parts(priced, scheme.label, s["passes"], c)
                p["drafting"] = sum(p.values())
                for k in eng:
                    eng[k].append(e[k])
                    pri[k].append(p[k])
            cells = []
            for k in eng:
                me, mp = st.median(eng[k]) * 1e3, st.median(pri[k]) * 1e3
                cells.append(f"{me:7.3f}/{mp:6.3f}" + (f" {mp / me:4.2f}" if me > 0 else "     "))
            print(f"{scheme.label:5} at {c:2} " + "".join(f"{x:>22}" for x in cells) + f"   ({len(rows)} steps)")
    print("(the price's `pick` column is pick and top-k together; the engine's is pick alone, top-k beside it)")


if __name__ == "__main__":
    torch.set_num_threads(1)
    main(float(sys.argv[1]), Path(sys.argv[2]), (sys.argv[3] if len(sys.argv) > 3 else "mtp1,mtp2").split(","),
         [int(x) for x in (sys.argv[4] if len(sys.argv) > 4 else "1,4").split(",")])
