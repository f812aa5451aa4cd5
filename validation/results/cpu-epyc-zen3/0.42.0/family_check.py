"""Why does the family's engine run its EAGLE head's reused products slower than the in-situ probe
reads them? Trained weights or longer prompts (2026-12-05, 0.42.0, exploratory). Run from the
repository root with the project's environment, alone (2 cores):

  python validation/results/cpu-epyc-zen3/0.42.0/family_check.py

An EAGLE chain of 5 at 4 and 16 sequences (40 tokens each), four variants, three rounds, each
round every variant once: random weights of the family's shape or the trained family (its own
EAGLE head; its held-out code prompts), with 16- or 128-token prompts. Products timed by
validation.reuse.ProductClock; each part's median a step over the whole steps
(validation.reuse.step_parts: the first pass's LM head and the later passes at one row a
sequence; with the family's acceptance, few steps are whole); printed, the median over the
rounds.
"""
import statistics, tempfile, yaml, torch
from pathlib import Path
torch.set_num_threads(1)
from engine.host_memory import retain_freed_memory
retain_freed_memory()
from engine.runner import run_scheme
from engine.checkpoint import resolve
from sim.spec import load_trace
from sim.workload import make_requests
from validation.calibrate import context_model
from validation.host_probes import checkpoint_of
from validation.reuse import ProductClock, step_parts
m = context_model("tiny")
def build(r, checkpoint, prompt, tokens=40):
    doc = {"version": 1, "name": "x", "seed": 1, "hardware": "cpu", "model": "tiny",
           "serving": {"max_num_seqs": r, "max_num_batched_tokens": 4096, "page_size": 16, "kv_pages": 64 * r, "paging": "indexshare"},
           "workload": {"requests": r, "arrival": {"process": "closed", "concurrency": r},
                        "prompt_tokens": {"dist": "fixed", "value": prompt}, "output_tokens": {"dist": "fixed", "value": tokens}},
           "speculation": [{"scheme": "eagle", "depth": 5}],
           "engine": {"checkpoint": checkpoint, "device": "cpu"} | ({"prompts": "code"} if checkpoint == "tiny" else {})}
    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / "t.yaml"; p.write_text(yaml.safe_dump(doc)); trace = load_trace(p)
    src = resolve(trace); model = src.build(); dr = src.drafters(model)
    return trace, model, dr, make_requests(trace.workload, trace.seed), src.prompts
def run(r, checkpoint, prompt):
    trace, model, dr, reqs, prompts = build(r, checkpoint, prompt)
    pc = ProductClock(model, dr.eagle)
    with pc:
        run_scheme(trace, trace.speculation[0], reqs, model, prompts=prompts, drafters=dr)
    got = step_parts(pc.steps, r, 5, skip=2)
    return {k: statistics.median(v) for k, v in got.items()}, len(got.get("first", []))
variants = [("random", checkpoint_of(m), 16), ("random", checkpoint_of(m), 128), ("family", "tiny", 16), ("family", "tiny", 128)]
for r in (4, 16):
    res = {i: [] for i in range(len(variants))}
    for rnd in range(3):
        for i, (name, ck, prompt) in enumerate(variants):
            res[i].append(run(r, ck, prompt))
    print(f"r={r}: part medians (us) over 3 runs; whole steps a run in brackets")
    keys = list(res[0][0][0])
    print("   " + "".join(f"{k:>14}" for k in keys))
    for i, (name, ck, prompt) in enumerate(variants):
        ok = [x for x in res[i] if x[0]]
        row = "".join(f"{statistics.median(x[0][k] for x in ok)*1e6:14.0f}" if ok else f"{'-':>14}" for k in keys)
        print(f"   {name:7} prompt {prompt:4}{row}  ({[x[1] for x in res[i]]})")
