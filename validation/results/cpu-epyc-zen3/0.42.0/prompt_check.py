"""Does a longer prompt (more KV between the products) move the in-situ probe's parts? (2026-12-05,
0.42.0, exploratory.) Run from the repository root of a checkout of a9a82e2, alone:

  python validation/results/cpu-epyc-zen3/0.42.0/prompt_check.py

The probe's runs (validation.reuse.insitu_probe's, products timed by wrapping `@`) at 4 and 16
sequences with 16-token prompts (the probe's) and 160-token ones (the family traces' 128 plus
part of the 64 generated), three runs each; each part's median time a step.
"""
import statistics, time, torch
torch.set_num_threads(1)
from engine.host_memory import retain_freed_memory
retain_freed_memory()
from engine.runner import run_scheme
from validation.calibrate import context_model
from validation.host_probes import checkpoint_of, probe_engine
from validation.reuse import ProductClock, step_parts
m = context_model("tiny")
print(m.layers, m.hidden, m.heads, m.kv_heads, m.head_dim, m.kv_bytes_per_token)
clock = time.perf_counter
def with_patch(r, entry, passes, prompt):
    trace, target, drafters, requests = probe_engine(r, "cpu", entry, 30, prompt=prompt, checkpoint=checkpoint_of(m))
    pc = ProductClock(target, drafters.eagle if passes else None)
    kinds = {w.data_ptr(): "layer" for mm in ([target] + ([drafters.eagle.model] if passes else [])) for layer in mm.layers
             for w in (layer.wqkv, layer.wo, layer.w_gate_up, layer.w_down)}
    kinds[target.lm_head.data_ptr()] = "lm"
    inner = torch.Tensor.__matmul__
    def mm(a, b):
        if pc.where is None:
            return inner(a, b)
        t0 = clock(); out = inner(a, b); dt = clock() - t0
        k = kinds.get(b.data_ptr())
        if k is not None:
            pc.where.setdefault(k, []).append((int(a.shape[0]), dt))
        return out
    torch.Tensor.__matmul__ = mm
    try:
        run_scheme(trace, trace.speculation[0], requests, target, drafters=drafters)
    finally:
        torch.Tensor.__matmul__ = inner
    got = step_parts(pc.steps, r, passes)
    return {k: statistics.median(v) for k, v in got.items()}
for r in (4, 16):
    for entry, passes in (({"scheme": "none"}, 0), ({"scheme": "eagle", "depth": 5}, 5)):
        res = {}
        for prompt in (16, 160):
            res[prompt] = [with_patch(r, entry, passes, prompt) for _ in range(3)]
        print(f"r={r} {entry['scheme']}")
        for k in res[16][0]:
            a = statistics.median(x[k] for x in res[16]); b = statistics.median(x[k] for x in res[160])
            print(f"    {k:14} prompt16 {a*1e6:8.0f} prompt160 {b*1e6:8.0f} ratio {b/a:.3f}")
