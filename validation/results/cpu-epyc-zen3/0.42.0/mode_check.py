"""The in-situ probe's two ways of timing the engine's products, side by side (2026-12-05, 0.42.0).
Run from the repository root of a checkout of a9a82e2 (whose ProductClock was a torch function
mode, `.mode`), with the project's environment, alone (2 cores):

  python validation/results/cpu-epyc-zen3/0.42.0/mode_check.py

At 1, 4 and 16 sequences, plain decoding and an EAGLE chain of 5 on random weights of the
family's shape (validation.reuse.insitu_probe's runs, 30 tokens each), three runs of each
way, alternately: `mode`, a torch function mode that sees every torch call; `patch`,
torch.Tensor.__matmul__ wrapped for the run (0.42.0's ProductClock); `plain`, the engine
unwatched. Prints the median step duration of each, and each part's median time a step
(validation.reuse.step_parts) under both ways.
"""
import statistics, time, torch
from engine.host_memory import retain_freed_memory
from engine.runner import run_scheme
from validation.calibrate import context_model
from validation.host_probes import checkpoint_of, probe_engine
from validation.reuse import ProductClock, step_parts
m = context_model("tiny")
clock = time.perf_counter
def with_mode(r, entry, passes):
    trace, target, drafters, requests = probe_engine(r, "cpu", entry, 30, checkpoint=checkpoint_of(m))
    pc = ProductClock(target, drafters.eagle if passes else None)
    with pc.mode:
        res = run_scheme(trace, trace.speculation[0], requests, target, drafters=drafters)
    got = step_parts(pc.steps, r, passes)
    d = res.result.steps.columns()["duration"]
    return {k: statistics.median(v) for k, v in got.items()}, statistics.median(d)
def with_patch(r, entry, passes, prompt=16):
    """The products' parts' medians and the median step, `@` wrapped for the run (prompt_check.py's too)."""
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
        res = run_scheme(trace, trace.speculation[0], requests, target, drafters=drafters)
    finally:
        torch.Tensor.__matmul__ = inner
    got = step_parts(pc.steps, r, passes)
    d = res.result.steps.columns()["duration"]
    return {k: statistics.median(v) for k, v in got.items()}, statistics.median(d)
def plain(r, entry):
    trace, target, drafters, requests = probe_engine(r, "cpu", entry, 30, checkpoint=checkpoint_of(m))
    res = run_scheme(trace, trace.speculation[0], requests, target, drafters=drafters)
    return statistics.median(res.result.steps.columns()["duration"])
if __name__ == "__main__":
    torch.set_num_threads(1)
    retain_freed_memory()
    for r in (1, 4, 16):
        for entry, passes in (({"scheme": "none"}, 0), ({"scheme": "eagle", "depth": 5}, 5)):
            A, B, C = [], [], []
            for i in range(3):
                A.append(with_mode(r, entry, passes)); B.append(with_patch(r, entry, passes)); C.append(plain(r, entry))
            print(f"r={r} {entry['scheme']}: step ms mode {statistics.median(a[1] for a in A)*1e3:.2f} patch {statistics.median(b[1] for b in B)*1e3:.2f} plain {statistics.median(C)*1e3:.2f}")
            for k in A[0][0]:
                ma = statistics.median(a[0][k] for a in A); mb = statistics.median(b[0][k] for b in B)
                print(f"    {k:14} mode {ma*1e6:8.0f} patch {mb*1e6:8.0f} mode/patch {ma/mb:.3f}")
