"""Whether a target pass's memory traffic before each call moves the calibration's layer probe
toward the engine's layer in place (engine_layer.py: 1.20x the probe): ROUNDS rounds, each the
`layers` probe's calls (the family-shaped model at 1 and 6 layers, 10 calls interleaved, their
difference a layer) as the calibration makes them, and the same calls each after the traffic
the calibration's host-time forwards run amid (validation.traffic: a target pass's reads),
order swapped round to round.

    python validation/results/cpu-epyc-zen4/0.52.0/layer_traffic.py [ROUNDS]

One thread, the engine's allocator settings. Prints each round's layer both ways and their
ratio, then the medians."""
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))
from validation.calibrate import DEEP  # noqa: E402
from validation.host_probes import layer_probes  # noqa: E402
from validation.timing import interleaved_times  # noqa: E402
from validation.traffic import Traffic  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "0.51.0"))
from reference_ab import family_engine  # noqa: E402


def main(rounds: int = 10) -> None:
    trace, source, _, _ = family_engine()
    fns = layer_probes(1, "cpu") | layer_probes(DEEP, "cpu")
    after_pass = Traffic.of(source.spec, "cpu").after_pass()
    ways = {"bare": None, "amid traffic": after_pass}
    layer = lambda t: (t[f"layer{DEEP}"] - t["layer1"]) / (DEEP - 1)  # noqa: E731
    got = {w: [] for w in ways}
    for r in range(rounds):
        for w in (list(ways) if r % 2 == 0 else list(ways)[::-1]):
            got[w].append(layer(interleaved_times(fns, "cpu", 10, ways[w])))
        print(f"round {r + 1}: bare {got['bare'][-1] * 1e6:.1f} us, amid traffic {got['amid traffic'][-1] * 1e6:.1f} us, "
              f"ratio {got['amid traffic'][-1] / got['bare'][-1]:.3f}", flush=True)
    print(f"medians over {rounds} rounds: bare {statistics.median(got['bare']) * 1e6:.1f} us, amid traffic "
          f"{statistics.median(got['amid traffic']) * 1e6:.1f} us, ratio (round by round) "
          f"{statistics.median(b / a for a, b in zip(got['bare'], got['amid traffic'])):.3f}")


if __name__ == "__main__":
    main(*(int(x) for x in sys.argv[1:]))
