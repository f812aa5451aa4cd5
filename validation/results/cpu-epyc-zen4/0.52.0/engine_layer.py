"""The engine's own layer in its forward against the calibration's layer probe, paired: ROUNDS
rounds, each one call of the probe (`layers`: the family-shaped model at 1 and 6 layers, 10
calls interleaved, their difference a layer, products included; validation.calibrate), then a
run of the family's `none` at concurrency 1 with the target's 4 layers and one with its first
layer alone (order swapped round to round). The difference of the two runs' median decode
forwards over 3 is the engine's layer in place (its later layers: the first runs the checked
ops), with its paged attention over the run's context (128-192 keys).

    python validation/results/cpu-epyc-zen4/0.52.0/engine_layer.py [ROUNDS]

One thread, the engine's allocator settings, one untimed round first. Prints each round's probe
layer, engine layer and their ratio, then the medians."""
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))
from engine.runner import run_scheme  # noqa: E402
from sim.workload import make_requests  # noqa: E402
from validation.calibrate import DEEP, for_trace  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "0.51.0"))
from reference_ab import family_engine, time_forwards  # noqa: E402


def main(rounds: int = 10) -> None:
    trace, source, model, _ = family_engine()
    cal = for_trace(trace, source.spec)
    probe = cal.probes["layers"]
    times, full = time_forwards(model), list(model.layers)

    def decode_forward(layers: int) -> float:
        """One run of `none` at 1 with the first `layers` layers: its decode forwards' median (s)."""
        model.layers = full[:layers]
        times.clear()
        res = run_scheme(trace, trace.speculation[0], make_requests(trace.workload, trace.seed, 1), model,
                         prompts=source.prompts)
        model.layers = full
        cols = res.result.steps.columns()
        fw = times[1:]  # the first is the runner's untimed warm-up
        return statistics.median(t for t, p in zip(fw, cols["prefill_tokens"]) if not p)
    probe()
    decode_forward(len(full))
    decode_forward(1)  # untimed
    got = []
    for r in range(rounds):
        t = probe()
        p = (t[f"layer{DEEP}"] - t["layer1"]) / (DEEP - 1)
        f = {n: decode_forward(n) for n in ((len(full), 1) if r % 2 == 0 else (1, len(full)))}
        e = (f[len(full)] - f[1]) / (len(full) - 1)
        got.append((p, e))
        print(f"round {r + 1}: probe layer {p * 1e6:.1f} us; engine forward {f[len(full)] * 1e3:.3f} ms with "
              f"{len(full)} layers, {f[1] * 1e3:.3f} ms with 1: a layer {e * 1e6:.1f} us; engine over probe {e / p:.3f}",
              flush=True)
    p, e = (statistics.median(g[k] for g in got) for k in (0, 1))
    print(f"medians over {rounds} rounds: probe layer {p * 1e6:.1f} us, engine layer {e * 1e6:.1f} us, "
          f"engine over probe (round by round) {statistics.median(b / a for a, b in got):.3f}")


if __name__ == "__main__":
    main(*(int(x) for x in sys.argv[1:]))
