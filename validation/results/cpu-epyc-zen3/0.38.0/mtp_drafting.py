"""Where an MTP step's drafting goes, outside the modules' passes (2026-12-05, 0.38.0).

  python validation/results/cpu-epyc-zen3/0.38.0/mtp_drafting.py SECONDS LABEL[,LABEL] [CONCS] [conditions]

Run from the repository root with the project's environment, alone (2 cores). Cycle after cycle,
4-request engine runs (CONCS requests at most) of each LABEL (default `mtp1,mtp2`) at each
concurrency of CONCS (default 1,4), timing every decode step's drafting as compare reads it
(engine.runner.TimedPlanner: its `plan` call and its hand-offs of the target's features) and,
inside it, the drafter's `draft` call, each module's forward (engine.model.Model.forward of a
drafter model) and the hand-offs (`timing`). Per label and concurrency the medians over cycles
of each run's median a step (steps at the full batch, no prefill): drafting, plan outside
draft, draft outside the forwards, the forwards, the hand-offs.

With `conditions` each cycle runs every label and concurrency three ways, one after another:
`alone` as above; `reference`, with validation.timing.settled_reference after every step (as
compare's engine runs have it); `between`, right after an untimed run of `eagle2` at the same
concurrency (another scheme's drafter and weights in the caches, as compare rotates them).
"""
from __future__ import annotations

import statistics as st
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "0.35.0"))
from host_regimes import family, run_at  # noqa: E402

PARTS = ("drafting", "plan-draft", "draft-fwd", "fwd", "handoff")


def main(seconds: float, labels: list[str], concs: list[int], conditions: bool = False) -> None:
    import engine.drafting.base as db
    import engine.model as em
    import engine.runner as er
    from validation.timing import settled_reference
    other = ["eagle2"] if conditions else []
    trace, model, drafters, prompts = family(labels + other, requests=max(4, *concs))
    others = [sc for sc in trace.speculation if sc.label in other]
    mine = [sc for sc in trace.speculation if sc.label in labels]
    clock = time.perf_counter
    cur: dict = {}
    steps: list[dict] = []

    def add(k, v):
        cur[k] = cur.get(k, 0.0) + v

    plan, timing = er.TimedPlanner.plan, er.TimedPlanner.timing

    def t_plan(self, seqs):
        t0 = clock()
        out = plan(self, seqs)
        add("plan", clock() - t0)
        add("n", len(seqs))
        return out

    def t_timing(self, fn):
        t0 = clock()
        timing(self, fn)
        add("handoff", clock() - t0)

    er.TimedPlanner.plan, er.TimedPlanner.timing = t_plan, t_timing
    base_plan = db.ModelDrafter.plan

    def d_plan(self, seqs):
        draft = self.draft

        def timed_draft(s, ks):
            t0 = clock()
            r = draft(s, ks)
            add("draft", clock() - t0)
            return r
        self.draft = timed_draft
        try:
            return base_plan(self, seqs)
        finally:
            del self.draft
    db.ModelDrafter.plan = d_plan
    forward = em.Model.forward

    def fwd(self, step, cache, inputs=None):
        if self is model:
            if cur:
                steps.append(dict(cur))
            cur.clear()
            return forward(self, step, cache, inputs)
        t0 = clock()
        r = forward(self, step, cache, inputs)
        add("fwd", clock() - t0)
        return r
    em.Model.forward = fwd

    def run(scheme, c, how="alone"):
        if how == "between":
            run_at(trace, others[0], c, model, drafters, prompts)
        steps.clear()
        cur.clear()
        run_at(trace, scheme, c, model, drafters, prompts, reference=settled_reference if how == "reference" else None)
        rows = [s for s in steps if s.get("n") == c and "draft" in s]
        out = {}
        for s in rows:
            s["drafting"] = s["plan"] + s.get("handoff", 0.0)
            s["plan-draft"] = s["plan"] - s["draft"]
            s["draft-fwd"] = s["draft"] - s.get("fwd", 0.0)
            s.setdefault("fwd", 0.0)
            s.setdefault("handoff", 0.0)
        for k in PARTS:
            out[k] = st.median(s[k] for s in rows) if rows else float("nan")
        return out

    hows = ("alone", "reference", "between") if conditions else ("alone",)
    cycles = []
    end = time.time() + seconds
    while time.time() < end:
        cycles.append({(sc.label, c, h): run(sc, c, h) for sc in mine for c in concs for h in hows})
    print(f"{len(cycles)} cycles, {seconds:.0f} s; ms a step, median over cycles of each run's median "
          "(a step's drafting is plan + hand-offs)")
    print(f"{'':22}" + "".join(f"{p:>12}" for p in PARTS) + ("   drafting over alone" if conditions else ""))
    for sc in mine:
        for c in concs:
            for h in hows:
                ratio = st.median(cy[(sc.label, c, h)]["drafting"] / cy[(sc.label, c, "alone")]["drafting"] for cy in cycles)
                print(f"{sc.label:6} at {c:2} {h:9}" + "".join(f"{st.median(cy[(sc.label, c, h)][k] for cy in cycles) * 1e3:12.3f}"
                                                             for k in PARTS) + (f"   {ratio:.3f}" if conditions else ""))


if __name__ == "__main__":
    torch.set_num_threads(1)
    main(float(sys.argv[1]), (sys.argv[2] if len(sys.argv) > 2 else "mtp1,mtp2").split(","),
         [int(x) for x in (sys.argv[3] if len(sys.argv) > 3 else "1,4").split(",")], "conditions" in sys.argv[4:])
