"""Whether the context the engine's layer attends to explains its cost over the calibration's
layer probe (engine_layer.py: 1.20x): ROUNDS rounds, each the `layers` probe's calls (the
family-shaped model at 1 and 6 layers, 10 calls interleaved, their difference a layer) over 8
keys, as the calibration makes them, and over CTX keys (default 160, the middle of the family
trace's decodes), order swapped round to round; against the simulator's price of that growth
(a decode step of one sequence over CTX keys less over 8, a layer) on the profile a comparison
measured (COMPARE_DIR/sim-trace.yaml).

    python validation/results/cpu-epyc-zen4/0.52.0/layer_context.py COMPARE_DIR [ROUNDS] [CTX]

One thread, the engine's allocator settings. Prints each round's layer at both contexts and
their difference, then the medians and the simulator's."""
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))
from sim.cost import ForwardCost, Work  # noqa: E402
from sim.spec import load_trace  # noqa: E402
from validation.calibrate import DEEP  # noqa: E402
from validation.host_probes import layer_probes  # noqa: E402
from validation.timing import interleaved_times  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "0.51.0"))
from reference_ab import family_engine  # noqa: E402


def main(compared: str, rounds: int = 10, ctx: int = 160) -> None:
    family_engine()  # one thread, the engine's allocator settings
    p = load_trace(Path(compared) / "sim-trace.yaml")
    fwd = ForwardCost(p.model, p.hardware, p.tp)
    price = lambda c: fwd(Work(tokens=1, seqs=1, pairs=c + 1, kv_read=c + 1, lm_tokens=1)).time  # noqa: E731
    sim = (price(ctx) - price(8)) / p.model.layers
    fns = {c: layer_probes(1, "cpu", c) | layer_probes(DEEP, "cpu", c) for c in (8, ctx)}
    layer = lambda t: (t[f"layer{DEEP}"] - t["layer1"]) / (DEEP - 1)  # noqa: E731
    got = {c: [] for c in fns}
    for r in range(rounds):
        for c in (list(fns) if r % 2 == 0 else list(fns)[::-1]):
            got[c].append(layer(interleaved_times(fns[c], "cpu", 10)))
        print(f"round {r + 1}: over 8 keys {got[8][-1] * 1e6:.1f} us, over {ctx} {got[ctx][-1] * 1e6:.1f} us, "
              f"difference {(got[ctx][-1] - got[8][-1]) * 1e6:.1f} us", flush=True)
    diff = statistics.median(b - a for a, b in zip(got[8], got[ctx]))
    print(f"medians over {rounds} rounds: over 8 keys {statistics.median(got[8]) * 1e6:.1f} us, over {ctx} "
          f"{statistics.median(got[ctx]) * 1e6:.1f} us, difference (round by round) {diff * 1e6:.1f} us; "
          f"the simulator prices the difference {sim * 1e6:.1f} us a layer")


if __name__ == "__main__":
    main(sys.argv[1], *(int(x) for x in sys.argv[2:]))
