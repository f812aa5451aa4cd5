"""Where plain decoding's target forward goes against its price, part by part, in the family's
engine: `none` of traces/family-schemes.yaml at each concurrency, its products timed in place
(validation.reuse.ProductClock), and each whole decode step (every sequence decoding one token)
priced as the simulator prices it under the profile a comparison measured (COMPARE_DIR's
sim-trace.yaml: its model and hardware), its products (the layers' and the LM head's, compute
or memory roof, gemm_step's factor), launches, elementwise passes, logit rows and attention.

    python validation/results/cpu-epyc-zen4/0.56.1/forward_parts.py COMPARE_DIR [CONCURRENCY ...] [--runs N]

Prints, per concurrency, medians over the runs' steps (ms): the forward measured and priced,
its products measured (the clock's `@` calls) and priced, and the rest (the forward less its
products: attention, elementwise passes, launches, host work) measured and priced."""
import statistics
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT))
from engine.checkpoint import resolve  # noqa: E402
from engine.host_memory import retain_freed_memory  # noqa: E402
from engine.runner import run_scheme  # noqa: E402
from sim.cost import ForwardCost, Work, _max  # noqa: E402
from sim.spec import load_trace  # noqa: E402
from sim.workload import make_requests  # noqa: E402
from validation.reuse import ProductClock  # noqa: E402


def priced_parts(cost: ForwardCost, c: int, keys: float) -> dict:
    """{forward, products, rest} seconds of a decode step of `c` sequences over `keys` keys."""
    total = cost(Work(tokens=c, seqs=c, pairs=keys, kv_read=keys, lm_tokens=c)).time
    dense = cost._compute(cost.dense_flops_per_tok * c, c, "dense")
    m_dense = (cost.weight_stream * cost.dense_weight_bytes + c * cost.act_per_tok) / cost.bw
    lm = cost._compute(cost.lm_flops_per_tok * c, c, "lm")
    io = cost.logit_bytes * c + cost.embed_bytes_per_tok * c
    m_lm = (cost.weight_stream * cost.lm_weight_bytes + io) / cost.bw
    products = cost.dense * float(_max(dense, m_dense)) + float(_max(lm, m_lm))
    return {"forward": float(total), "products": products, "rest": float(total) - products}


def clocked_steps(model, run, c: int) -> list[dict]:
    """The whole decode steps of `c` sequences (every product at c rows, keys timed) of `run()`, an
    engine run of `model`, under ProductClock: [{"forward", "products", "keys"}, ...] seconds."""
    clock = ProductClock(model)
    with clock:
        run()
    out = []
    for s in clock.steps:
        t = s.get("target", {})
        rows = [n for v in t.values() for n, _ in v]
        if rows and all(n == c for n in rows) and "keys" in s:
            out.append({"forward": s["forward"], "products": sum(x for v in t.values() for _, x in v), "keys": float(s["keys"])})
    return out


def family_run(source, trace, c: int):
    """(model, run) of `none` of `trace` at concurrency `c` on a fresh build of its checkpoint."""
    model = source.build()  # the clock wraps its forward: a fresh one a run
    none = next(s for s in trace.speculation if s.name == "none")
    return model, lambda: run_scheme(trace, none, make_requests(trace.workload, trace.seed, c), model)


def main(argv: list[str]) -> None:
    runs = int(argv[argv.index("--runs") + 1]) if "--runs" in argv else 3
    args = [a for i, a in enumerate(argv) if a != "--runs" and (i == 0 or argv[i - 1] != "--runs")]
    compared, concs = Path(args[0]), [int(c) for c in args[1:]] or [1, 4]
    torch.set_num_threads(1)
    retain_freed_memory()
    priced_trace = load_trace(compared / "sim-trace.yaml")
    hw = priced_trace.hardware.for_weights(priced_trace.model.weight_bytes)
    cost = ForwardCost(priced_trace.model, hw)
    trace = load_trace(ROOT / "traces/family-schemes.yaml")
    source = resolve(trace)
    print(f"# profile {compared}/sim-trace.yaml; {runs} runs of `none` a concurrency; medians over whole decode steps (ms)")
    for c in concs:
        got: dict = {}
        for _ in range(runs):
            for s in clocked_steps(*family_run(source, trace, c), c):
                price = priced_parts(cost, c, s["keys"])
                for k, v in (("forward", s["forward"]), ("products", s["products"]), ("rest", s["forward"] - s["products"])):
                    got.setdefault(k, []).append(v)
                    got.setdefault("p_" + k, []).append(price[k])
        med = {k: statistics.median(v) * 1e3 for k, v in got.items()}
        print(f"concurrency {c}: {len(got['forward'])} steps; " + "; ".join(
            f"{k} {med[k]:.3f} priced {med['p_' + k]:.3f} ({med['p_' + k] / med[k]:.3f})" for k in ("forward", "products", "rest")))


if __name__ == "__main__":
    main(sys.argv[1:])
