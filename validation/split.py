"""`python -m validation split TRACE --out DIR [--hardware PROFILE] [--concurrency N] [--rounds R]`:
where an engine step's time goes, each part against the simulator's price for it.

For every scheme of the trace at one concurrency (closed loop, the trace's requests), the engine
runs the trace `rounds` times (the schemes' order reversed every other round) and each steady step
(every running sequence decoding, none prefilling, the step's most common query-token count) is
split three ways: drafting (the planner's call and feature hand-off, as `compare`'s draft_time), the target's forward
(`Model.forward` inside `EngineRun._forward_verify`, timed in the run) and the rest (scheduling,
packing the step, verification, commit: the step's clock less the other two). A few of those
steps' forwards are then timed again bare, the same batch and KV cache called back to back
(validation.timing.mean_time), and each step is priced as the simulator prices it under the
profile: the bare forward as `validation.steptime.predict` prices the grid's points, the rest as
what the simulator's step adds beyond that (its full target price, `ForwardCost` with the logits
plus `host_time` and `verify_host`, less the bare forward's price).

So a target-time error in `compare` parts into three factors, measured side by side in one
process: the bare forward's price against its time (the step-time grid's question, at this
batch), the forward inside the run against the same forward bare (what the run around it does
to it: the drafter's passes between the target's, the host work), and the rest's price against
its time. Writes DIR/split.json; prints two lines per scheme: the medians over every run's steady
steps, then run by run (each run's medians, their range) the in-run forward and the target's
priced-over-engine ratio, which say how far the host moved between the runs (on the shared
2-core VMs one scheme's three runs' forwards have differed by a third: cpu-epyc-zen3/0.57.0/split-eagle-c4.txt).
"""
from __future__ import annotations

import json
import statistics
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

from sim.cli import writing
from sim.cost import ForwardCost, Work, host_time, verify_calls, verify_host
from sim.hardware import hardware_from_node
from sim.spec import load_trace
from sim.workload import make_requests
from validation.steptime import ROOT, Node, bare_forward

BARE_STEPS = 8  # steady steps per run whose forwards are timed again bare
BARE_S = 0.2  # seconds of bare calls per such step (at least)


@dataclass
class Captured:
    """One engine run's target forwards: per step, the scheduler's batch, the forward's packed
    batch and KV cache, and its seconds in the run."""
    batches: list = field(default_factory=list)
    forwards: list = field(default_factory=list)  # (step batch, cache, seconds)
    inside: bool = False


def instrument(run, cap: Captured) -> None:
    """Time `run`'s target forwards (engine.runner.EngineRun) into `cap`, on this run's objects
    only: the forward calls made while its _forward_verify runs (not its warm-up, not a drafter's)."""
    model, fv, fwd = run.model, run._forward_verify, run.model.forward

    def forward(step, cache, *args, **kwargs):
        t0 = time.perf_counter()
        out = fwd(step, cache, *args, **kwargs)
        run.sync()
        if cap.inside:
            cap.forwards.append((step, cache, time.perf_counter() - t0))
        return out

    def forward_verify(batch):
        cap.batches.append(batch)
        cap.inside = True
        try:
            return fv(batch)
        finally:
            cap.inside = False

    model.forward = forward  # an instance attribute: this run's model, for its lifetime
    run._forward_verify = forward_verify


def steady(cols) -> list[int]:
    """The steps with every running sequence decoding, none prefilling, at the most common
    query-token count among those (a drafted chain or tree cut short near a request's end is not
    the scheme's steady step)."""
    full = max(cols["batch_size"]) if len(cols["batch_size"]) else 0
    cand = [i for i in range(len(cols["batch_size"])) if cols["prefill_tokens"][i] == 0 and cols["batch_size"][i] == full]
    if not cand:
        return []
    mode = Counter(int(cols["query_tokens"][i]) for i in cand).most_common(1)[0][0]
    return [i for i in cand if cols["query_tokens"][i] == mode]


@dataclass(frozen=True)
class PriceInput:
    """What the simulator prices a step by: its forward's work, its sequences, its allocator
    operations, and its verification (the sampling sequences' draft shapes, the drafted nodes)."""
    work: Work
    seqs: int
    ops: int
    shapes: tuple
    nodes: int


def price_input(batch, allocs: int, frees: int, model=None) -> PriceInput:
    """`model`: the target's spec, which splits the reference's padded attention calls (sim.cost.call_seqs)."""
    return PriceInput(batch.work(model=model), batch.size, allocs + frees, tuple(batch.shapes()), sum(map(len, batch.trees)))


def priced(spec, hw, inp: PriceInput) -> tuple[float, float]:
    """(bare forward, rest) as the simulator prices this step under `hw` (not yet for_weights)."""
    served = hw.for_weights(spec.weight_bytes)
    full = ForwardCost(spec, served)(inp.work).time + host_time(served, inp.seqs, inp.ops)
    if served.prices_verification:
        full += verify_host(served, *verify_calls(inp.shapes), inp.nodes)
    bare_s = bare_forward(spec, hw, inp.work)
    return bare_s, float(full - bare_s)


def measure_run(trace, scheme, workload, source, model, drafters, device: str, bare_steps: int = BARE_STEPS) -> dict:
    """One engine run of `scheme`: its steady steps' parts (with what prices them: "inputs") and
    `bare_steps` of their forwards timed bare ("bare": each names its step's index in "steps")."""
    from engine.runner import EngineRun
    from validation.timing import mean_time
    run = EngineRun(trace, scheme, workload, model, prompts=source.prompts, drafters=drafters)
    cap = Captured()
    instrument(run, cap)
    res = run.run()
    model.__dict__.pop("forward", None)  # the bare calls below: the model's own forward
    cols = res.result.steps.columns()
    n = len(cols["duration"])
    if len(cap.batches) != n or len(cap.forwards) != n:
        raise RuntimeError(f"{scheme.label}: {n} steps but {len(cap.batches)} batches and {len(cap.forwards)} target forwards")
    keep = steady(cols)
    rows, inputs = [], []
    for i in keep:
        fwd = cap.forwards[i][2]
        draft = float(cols["draft_time"][i])
        rows.append({"step": float(cols["duration"][i]), "draft": draft, "forward": fwd,
                     "rest": float(cols["duration"][i]) - draft - fwd})
        inputs.append(price_input(cap.batches[i], int(cols["page_allocs"][i]), int(cols["page_frees"][i]), trace.model))
    bare = []
    for j in range(0, len(keep), max(1, len(keep) // max(1, bare_steps))):
        if len(bare) == bare_steps:
            break
        step, cache, fwd = cap.forwards[keep[j]]
        bare.append({"step": j, "forward": fwd, "bare": mean_time(lambda: model.forward(step, cache), device, 1,
                                                                   min_s=BARE_S)})
    return {"steps": rows, "bare": bare, "inputs": inputs,
            "query_tokens": int(cols["query_tokens"][keep[0]]) if keep else 0,
            "batch": int(cols["batch_size"][keep[0]]) if keep else 0}


def price_run(run: dict, spec, hw) -> None:
    """Price a measured run's steady steps under `hw` (in place; its "inputs" consumed)."""
    for row, inp in zip(run["steps"], run.pop("inputs")):
        row["bare_priced"], row["rest_priced"] = priced(spec, hw, inp)
    for b in run["bare"]:
        b["bare_priced"] = run["steps"][b["step"]]["bare_priced"]


def summary(runs: list[dict]) -> dict:
    """Medians over every run's steady steps (and timed-bare steps) of one scheme."""
    med = statistics.median
    steps = [s for r in runs for s in r["steps"]]
    bare = [b for r in runs for b in r["bare"]]
    if not steps or not bare:
        return {"steady_steps": len(steps)}
    out = {k: med(s[k] for s in steps) for k in ("step", "draft", "forward", "rest", "bare_priced", "rest_priced")}
    out |= {"steady_steps": len(steps), "bare_steps": len(bare), "batch": runs[0]["batch"],
            "query_tokens": runs[0]["query_tokens"],
            "bare": med(b["bare"] for b in bare),
            # each timed-bare step against its own in-run forward and its own price
            "inrun_over_bare": med(b["forward"] / b["bare"] for b in bare),
            "priced_over_bare": med(b["bare_priced"] / b["bare"] for b in bare),
            "rest_priced_over_rest": med(s["rest_priced"] for s in steps) / max(med(s["rest"] for s in steps), 1e-12)}
    out["target_priced_over_engine"] = target_ratio(out)
    # it and the in-run forward run by run: how far the host moved them between runs
    each = [{k: med(s[k] for s in r["steps"]) for k in ("forward", "rest", "bare_priced", "rest_priced")}
            for r in runs if r["steps"]]
    out["forward_by_run"] = [e["forward"] for e in each]
    out["target_priced_over_engine_by_run"] = [target_ratio(e) for e in each]
    return out


def target_ratio(m: dict) -> float:
    """The simulator's target part (bare price + priced rest) over the engine's (forward + rest),
    from medians `m`."""
    return (m["bare_priced"] + m["rest_priced"]) / (m["forward"] + m["rest"])


def split(trace_path: Path, out: Path, hardware: Path | None = None, concurrency: int | None = None,
          rounds: int = 3, calibrate: bool = False, cycles: int = 2, progress=print) -> dict:
    """Measure and price every scheme of the trace (see the module's docstring); with `calibrate`,
    price under a profile whose probes ran between the engine's runs (`cycles` cycles of them a
    round, written to DIR/measured-hardware.yaml), else under `hardware`."""
    from engine.checkpoint import resolve
    from validation.calibrate import for_trace
    from validation.profile import write_profile
    trace = load_trace(trace_path)
    hw_path = hardware or ROOT / "traces" / "hardware" / "cpu-measured.yaml"
    hw = None if calibrate else hardware_from_node(Node(str(hw_path), str(hw_path), "hardware"), ROOT)
    conc = concurrency or (list(trace.sweep_concurrency) or [None])[0]  # None: the trace's own arrivals
    source = resolve(trace)
    writing(out, out.mkdir, parents=True, exist_ok=True)  # before the runs: a bad --out fails at once
    model = source.build()
    drafters = source.drafters_for(model, trace.speculation)
    ran = replace(trace, model=source.spec)
    workload = make_requests(trace.workload, trace.seed, conc)
    device = str(model.device.type)
    cal = for_trace(trace, source.spec) if calibrate else None
    between = cal.spread(len(trace.speculation), cycles) if cal is not None else (lambda: None)
    measure_run(ran, trace.speculation[0], workload, source, model, drafters, device, bare_steps=0)  # first-call costs
    by_label: dict[str, list[dict]] = {s.label: [] for s in trace.speculation}
    for r in range(rounds):
        order = list(trace.speculation) if r % 2 == 0 else list(reversed(trace.speculation))
        for scheme in order:
            between()
            by_label[scheme.label].append(measure_run(ran, scheme, workload, source, model, drafters, device))
            progress(f"round {r + 1}/{rounds}: {scheme.label} @ {workload.closed_concurrency or 'open'}")
    if cal is not None:
        cal.complete()
        hw_path = out / "measured-hardware.yaml"
        writing(out, hw_path.write_text, write_profile(cal.figures(), cal.size_mb))
        hw = hardware_from_node(Node(str(hw_path), str(hw_path), "hardware"), ROOT)
    for runs in by_label.values():
        for run in runs:
            price_run(run, source.spec, hw)
    result = {"trace": str(trace_path), "hardware": str(hw_path), "concurrency": workload.closed_concurrency or conc,
              "rounds": rounds, "schemes": {label: summary(runs) for label, runs in by_label.items()}, "runs": by_label}
    writing(out, (out / "split.json").write_text, json.dumps(rounded(result)))
    return result


def rounded(doc):
    """`doc` with every float to 0.1 us (seconds) or 7 decimals (ratios): split.json's steps
    hold thousands of them."""
    if isinstance(doc, float):
        return round(doc, 7)
    if isinstance(doc, dict):
        return {k: rounded(v) for k, v in doc.items()}
    if isinstance(doc, list):
        return [rounded(v) for v in doc]
    return doc


def print_split(result: dict) -> None:
    print(f"concurrency {result['concurrency']}, {result['rounds']} rounds; medians over the steady steps "
          f"(ms), ratios per step; profile {result['hardware']}")
    for label, s in result["schemes"].items():
        if "step" not in s:
            print(f"  {label:11} no steady steps")
            continue
        ms = {k: s[k] * 1e3 for k in ("step", "draft", "forward", "rest", "bare", "rest_priced")}
        print(f"  {label:11} B={s['batch']:<3} q={s['query_tokens']:<4} step {ms['step']:7.2f} = draft {ms['draft']:6.2f}"
              f" + target forward {ms['forward']:7.2f} + rest {ms['rest']:5.2f}; forward bare {ms['bare']:7.2f}:"
              f" in run / bare {s['inrun_over_bare']:.3f}, priced / bare {s['priced_over_bare']:.3f};"
              f" rest priced {ms['rest_priced']:5.2f} ({s['rest_priced_over_rest']:.2f}x);"
              f" target priced / engine {s['target_priced_over_engine']:.3f}")
        fw, tr = s["forward_by_run"], s["target_priced_over_engine_by_run"]
        print(f"  {'':11} run by run: target forward {min(fw) * 1e3:.2f}-{max(fw) * 1e3:.2f} ms,"
              f" target priced / engine {min(tr):.3f}-{max(tr):.3f} ({len(fw)} runs)")
