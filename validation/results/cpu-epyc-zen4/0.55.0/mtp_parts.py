"""Where an MTP module's drafting goes in the engine, against the simulator's parts, for `mtp1` on the family.

    python validation/results/cpu-epyc-zen4/0.55.0/mtp_parts.py COMPARE_DIR ROUNDS [CONCURRENCY...]

Runs traces/family-schemes.yaml's `mtp1` through the engine (one thread) at each concurrency
(default 1 4) for ROUNDS rounds, timing its steps' drafting (the runner's draft_time) and, within
it, the module's fused input (FeatureHead.inputs, whole) and its forward (whole), by
validation.reuse.ProductClock and a wrapper of the module's forward. Over the steps with every
sequence decoding (no prefill), it prices each step's one pass as the simulator does under the
profile the comparison measured (COMPARE_DIR/sim-trace.yaml): sim.drafters.PassPricer.direct over
the pass's rows (several: the sequences catching up on two entries), its host part
(drafter_host_time) and its fused input (fused_input_cost); the forward is the rest. Prints
medians over the steps: engine and simulator, drafting = input + forward + host, and their ratios."""
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT))
from engine.cli import build  # noqa: E402
from engine.host_memory import retain_freed_memory  # noqa: E402
from engine.runner import run_scheme  # noqa: E402
from sim.drafters import PassPricer, drafter_host_time, fused_input_cost  # noqa: E402
from sim.spec import load_trace  # noqa: E402
from sim.workload import make_requests  # noqa: E402
from validation.reuse import ProductClock  # noqa: E402


def main(compared: str, rounds: str, *levels: str) -> None:
    torch.set_num_threads(1)
    retain_freed_memory()
    trace = load_trace(ROOT / "traces" / "family-schemes.yaml")
    priced = load_trace(Path(compared) / "sim-trace.yaml")
    scheme = next(s for s in trace.speculation if s.label == "mtp1")
    pscheme = next(s for s in priced.speculation if s.label == "mtp1")
    spec, fuse = pscheme.drafter_spec()
    hw = priced.hardware.drafter()
    pricer = PassPricer(spec, hw, priced.tp, fuse_input=fuse, catch_up=pscheme.catch_up, shared_lm=pscheme.shared_lm,
                        layers_again=pscheme.layers_again)
    source, model, drafters = build(trace)
    head = drafters.mtp[0]
    print(f"# {' '.join(sys.argv)}  ({time.strftime('%H:%M:%S')})")
    print("# medians (ms): drafting = input + forward + host (engine's host: the rest); rows a step")
    for k in range(int(rounds)):
        for c in [int(x) for x in levels] or [1, 4]:
            forwards = []
            inner = head.model.forward

            def forward(*args, **kwargs):
                t0 = time.perf_counter()
                try:
                    return inner(*args, **kwargs)
                finally:
                    forwards.append(time.perf_counter() - t0)
            head.model.forward = forward
            ops = model.ops_unchecked  # ProductClock wraps its attention call; restored after
            clock = ProductClock(model, head)
            with clock:
                res = run_scheme(trace, scheme, make_requests(trace.workload, trace.seed, c), model,
                                 prompts=source.prompts, drafters=drafters)
            del head.model.forward, model.forward, head.inputs  # the instances' wrappers
            model.ops_unchecked = ops
            cols = res.result.steps.columns()
            steps = clock.steps[1:]  # [0]: the runner's untimed warm-up pass
            assert len(steps) == len(cols["duration"]) and len(forwards) == sum(len(s["passes"]) for s in clock.steps)
            fw = iter(forwards)
            rows = []
            for i, s in enumerate(clock.steps):
                f = [next(fw) for _ in s["passes"]]
                if i == 0 or len(s["passes"]) != 1:
                    continue
                j = i - 1
                if int(cols["batch_size"][j]) != c or cols["prefill_tokens"][j]:
                    continue
                p = s["passes"][0]
                tok = p["input"][0][0]
                inp = p["input"][0][1]
                eng = (cols["draft_time"][j], inp, f[0])
                ctx = s["keys"] - int(cols["query_tokens"][j])  # the target's keys before the step
                several = tok - c
                total = pricer.direct(c, ctx, [(tok, c, several)]).time
                host = drafter_host_time(hw, c, [tok], False, pscheme.catch_up)
                sin = fused_input_cost(spec, hw, priced.tp, tok).time
                rows.append((*eng, eng[0] - eng[1] - eng[2], total, sin, total - sin - host, host, tok))
            rows = rows[3:]
            m = [statistics.median(r[x] for r in rows) for x in range(9)]
            print(f"round {k + 1} c{c:<3} {len(rows):4d} steps  engine {m[0] * 1e3:.3f} = {m[1] * 1e3:.3f} + {m[2] * 1e3:.3f}"
                  f" + {m[3] * 1e3:.3f}   simulator {m[4] * 1e3:.3f} = {m[5] * 1e3:.3f} + {m[6] * 1e3:.3f} + {m[7] * 1e3:.3f}"
                  f"   ratios {m[4] / m[0]:.3f} = {m[5] / m[1]:.3f} {m[6] / m[2]:.3f} {m[7] / m[3]:.3f}   rows {m[8]:.0f}",
                  flush=True)
    print(f"# end {time.strftime('%H:%M:%S')}")


if __name__ == "__main__":
    main(*sys.argv[1:])
