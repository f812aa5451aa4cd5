"""The engine's own layer called back to back, against in its steps (engine_layer.py: 1,000 us
in place, 1.20x the calibration's layer probe): one run of the family's `none` at 1 keeps a
decode step from its middle (its StepBatch and KV cache), then ROUNDS rounds time the target's
forward on it, 20 calls back to back with its 4 layers and 20 with its first alone (order
swapped round to round); (F4 - F1)/3 is a later layer with nothing between the calls.

    python validation/results/cpu-epyc-zen4/0.52.0/engine_layer_bare.py [ROUNDS]

One thread, the engine's allocator settings. Prints each round's layer, then the median."""
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))
from engine.runner import run_scheme  # noqa: E402
from sim.workload import make_requests  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "0.51.0"))
from reference_ab import family_engine  # noqa: E402

CALLS = 20


def main(rounds: int = 10) -> None:
    trace, source, model, _ = family_engine()
    forward, kept, full = model.forward, [], list(model.layers)

    def keep(step, cache, *rest):
        if step.token_ids.numel() == 1 and step.kv_lens.item() >= 160 and not kept:
            kept.append((step, cache))
        return forward(step, cache, *rest)
    model.forward = keep
    run_scheme(trace, trace.speculation[0], make_requests(trace.workload, trace.seed, 1), model, prompts=source.prompts)
    model.forward = forward
    step, cache = kept[0]

    def timed(layers: int) -> float:
        model.layers = full[:layers]
        forward(step, cache)
        t0 = time.perf_counter()
        for _ in range(CALLS):
            forward(step, cache)
        model.layers = full
        return (time.perf_counter() - t0) / CALLS
    got = []
    for r in range(rounds):
        f = {n: timed(n) for n in ((len(full), 1) if r % 2 == 0 else (1, len(full)))}
        got.append((f[len(full)] - f[1]) / (len(full) - 1))
        print(f"round {r + 1}: forward {f[len(full)] * 1e3:.3f} ms with {len(full)} layers, {f[1] * 1e3:.3f} ms with 1: "
              f"a layer {got[-1] * 1e6:.1f} us", flush=True)
    print(f"median over {rounds} rounds: a layer {statistics.median(got) * 1e6:.1f} us back to back "
          f"(over {int(step.kv_lens.item())} keys)")


if __name__ == "__main__":
    main(*(int(x) for x in sys.argv[1:]))
