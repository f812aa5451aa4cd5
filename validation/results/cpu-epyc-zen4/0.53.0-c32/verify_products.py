"""Whether the target's products in a verify pass at 32 sequences run slower in place than the
same products at the same rows in plain decoding: the family's `mtp1` at 32 (two query tokens a
sequence: 64 rows) against `none` at 64 (64 rows), with `none` at 32 and `mtp2` at 32 (96 rows)
beside them.

    python validation/results/cpu-epyc-zen4/0.53.0-c32/verify_products.py [ROUNDS] [PROFILE.yaml] [WAY ...]

A WAY is SCHEME:SEQUENCES:QUERY_TOKENS (e.g. mtp1:16:2); by default the four above.

traces/family-schemes-c32.yaml (max_num_seqs raised to 64), the family's own drafters, one
thread, the engine's allocator settings; one untimed run of each way, then ROUNDS (default 4)
rounds, each in a rotated order. validation.reuse.ProductClock times the target's products
where they run. For each run, over its steps whose target products all ran the whole batch's
rows (every sequence, no prefill): the median a step of a layer's four products (the target's
layers' products over its layers), of the LM head's product, of a later layer whole (with its
attention and host work), and of a later layer's attention call (the backend's paged_attention,
timed around the call) and KV store; the step's keys. Prints each run and each way's medians over its
runs. With a PROFILE (a comparison's measured-hardware.yaml), also the cost model's price of such
a later layer but for its host time (sim.cost.ForwardCost, one layer, no LM head, no launches;
its products at gemm_step's factor; a chain of q query tokens over a sequence's keys: pairs
q x keys - q(q - 1)/2 a sequence) at the way's median keys, and the layer's excess over it; and
of that price, its attention's (everything but the token part: products, elementwise passes)."""
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch
import yaml

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT))
from engine.cli import build  # noqa: E402
from engine.host_memory import retain_freed_memory  # noqa: E402
from engine.runner import run_scheme  # noqa: E402
from sim.cost import ForwardCost, Work, alike_rows  # noqa: E402
from sim.hardware import hardware_from_node  # noqa: E402
from sim.spec import load_trace  # noqa: E402
from sim.specio import Node  # noqa: E402
from sim.workload import make_requests  # noqa: E402
from validation.reuse import ProductClock  # noqa: E402

WAYS = (("none", 32, 1), ("none", 64, 1), ("mtp1", 32, 2), ("mtp2", 32, 3))  # (scheme, sequences, query tokens a sequence)


def time_later_calls(model, names) -> dict[str, list[float]]:
    """Time the target's later layers' kernels `names` (engine.model: layers 1 on call
    model.ops_unchecked) inside its forwards: {name: [seconds within each target forward, in
    call order]}, one entry a forward (clear the lists before each run)."""
    later, inside = model.ops_unchecked, [False]
    calls: dict[str, list[float]] = {name: [] for name in names}

    def timed_call(name):
        fn = getattr(later, name)

        def call(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                if inside[0]:
                    calls[name][-1] += time.perf_counter() - t0
        return call
    model.ops_unchecked = replace(later, **{name: timed_call(name) for name in names})  # a frozen dataclass
    forward = model.forward

    def marked(*args, **kwargs):
        for v in calls.values():
            v.append(0.0)
        inside[0] = True
        try:
            return forward(*args, **kwargs)
        finally:
            inside[0] = False
    model.forward = marked
    return calls


def full_batch(steps: list, rows: int) -> list[int]:
    """The indices of ProductClock's `steps` whose target products all ran `rows` rows (and an
    LM head): every sequence in the batch, no prefill."""
    return [i for i, s in enumerate(steps) if s["target"].get("lm")
            and all(n == rows for v in s["target"].values() for n, _ in v)]


def layer_price(profile: str, spec, c: int, q: int, keys: float) -> tuple[float, float]:
    """The cost model's price (us) of a later layer but for its host time, and of its attention:
    c sequences, q query tokens each, `keys` keys in all (their context and query tokens)."""
    doc = yaml.safe_load(Path(profile).read_text())
    hw = replace(hardware_from_node(Node(doc, None, "hardware"), Path(".")), launch_s=0.0).for_weights(spec.weight_bytes)
    cost = ForwardCost(spec, hw, layers=1, lm_head=False)
    multi = alike_rows(c * q, keys, c) if q > 1 else {}
    work = Work(tokens=c * q, seqs=c, pairs=q * keys - c * q * (q - 1) / 2, kv_read=keys, lm_tokens=0, **multi)
    whole = float(cost(work).time)
    return whole * 1e6, (whole - float(cost._token_part(c * q, 0)[0])) * 1e6


def main(rounds: str = "4", profile: str | None = None, *picked: str) -> None:
    ways = tuple((w.split(":")[0], int(w.split(":")[1]), int(w.split(":")[2])) for w in picked) or WAYS
    torch.set_num_threads(1)
    retain_freed_memory()
    trace = load_trace(ROOT / "traces" / "family-schemes-c32.yaml")
    trace = replace(trace, serving=replace(trace.serving, max_num_seqs=64))
    source, model, drafters = build(trace)
    schemes = {s.label: s for s in trace.speculation}
    layers = len(model.layers)
    clock = ProductClock(model)
    calls = time_later_calls(model, ("paged_attention", "store_kv"))

    def run(label: str, c: int, q: int) -> tuple[float, ...]:
        clock.steps = []
        for v in calls.values():
            v.clear()
        with clock:
            run_scheme(trace, schemes[label], make_requests(trace.workload, trace.seed, c), model,
                       prompts=source.prompts, drafters=drafters)
        rows = c * q
        assert len(calls["store_kv"]) == len(clock.steps)
        for i, s in enumerate(clock.steps):
            s["attn"], s["store"] = (calls[n][i] / (layers - 1) for n in calls)
        whole = [clock.steps[i] for i in full_batch(clock.steps, rows) if "layer" in clock.steps[i]]
        prod = [sum(t for _, t in s["target"]["layer"]) / layers for s in whole]
        lm = [sum(t for _, t in s["target"]["lm"]) for s in whole]
        return (statistics.median(prod) * 1e6, statistics.median(lm) * 1e6,
                statistics.median(s["layer"] for s in whole) * 1e6, statistics.median(s["keys"] for s in whole),
                statistics.median(s["attn"] for s in whole) * 1e6, statistics.median(s["store"] for s in whole) * 1e6)

    for way in ways:
        run(*way)  # untimed
    got: dict[tuple, list] = {w: [] for w in ways}
    for i in range(int(rounds)):
        for way in ways[i % len(ways):] + ways[:i % len(ways)]:
            r = run(*way)
            got[way].append(r)
            print(f"{way[0]:5} at {way[1]:2} ({way[1] * way[2]:3} rows): a layer's products {r[0]:7.1f} us, LM head {r[1]:7.1f} us,"
                  f" a later layer whole {r[2]:7.1f} us (attention {r[4]:6.1f}, KV store {r[5]:5.1f}), keys {r[3]:.0f}", flush=True)
    print("medians over the runs:")
    for way, v in got.items():
        m = [statistics.median(x[k] for x in v) for k in range(6)]
        priced = ""
        if profile:
            price, attn = layer_price(profile, source.spec, way[1], way[2], m[3])
            priced = (f"; priced {price:7.1f} us (attention {attn:6.1f}), excess {m[2] - price:7.1f} us"
                      f" (attention's {m[4] - attn:6.1f}, the rest's {m[2] - m[4] - price + attn:6.1f})")
        print(f"{way[0]:5} at {way[1]:2} ({way[1] * way[2]:3} rows): a layer's products {m[0]:7.1f} us, LM head {m[1]:7.1f} us,"
              f" a later layer whole {m[2]:7.1f} us (attention {m[4]:6.1f}, KV store {m[5]:5.1f}), keys {m[3]:.0f}{priced}")


if __name__ == "__main__":
    main(*sys.argv[1:])
