"""0.56.1's forward_parts.py on any trace's workload, its concurrencies alternated run by run (so
a slow spell of the host falls on each of them alike): plain decoding's target forward against
its price, part by part, under the profile a comparison measured.

    python validation/results/cpu-epyc-zen4/0.57.0/forward_parts_alt.py COMPARE_DIR TRACE CONCURRENCY ... [--runs N]

Prints, per concurrency, medians over the runs' whole decode steps (ms): the forward measured and
priced, its products (the clock's `@` calls) and the rest (attention, elementwise passes,
launches, host work), and each one's ratio at every concurrency over its ratio at the first."""
import importlib.util
import statistics
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT))
from engine.checkpoint import resolve  # noqa: E402
from engine.host_memory import retain_freed_memory  # noqa: E402
from sim.cost import ForwardCost  # noqa: E402
from sim.spec import load_trace  # noqa: E402

_spec = importlib.util.spec_from_file_location("forward_parts", ROOT / "validation/results/cpu-epyc-zen4/0.56.1/forward_parts.py")
fp = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fp)
PARTS = ("forward", "products", "rest")


def main(argv: list[str]) -> None:
    runs = int(argv[argv.index("--runs") + 1]) if "--runs" in argv else 3
    args = [a for i, a in enumerate(argv) if a != "--runs" and (i == 0 or argv[i - 1] != "--runs")]
    compared, trace_path, concs = Path(args[0]), Path(args[1]), [int(c) for c in args[2:]]
    torch.set_num_threads(1)
    retain_freed_memory()
    priced_trace = load_trace(compared / "sim-trace.yaml")
    cost = ForwardCost(priced_trace.model, priced_trace.hardware.for_weights(priced_trace.model.weight_bytes))
    trace = load_trace(trace_path)
    source = resolve(trace)
    print(f"# profile {compared}/sim-trace.yaml; trace {trace_path}; {runs} runs of `none` at each of {concs}, "
          "alternated; medians over whole decode steps (ms)")
    got: dict = {c: {} for c in concs}
    for _ in range(runs):
        for c in concs:
            for s in fp.clocked_steps(*fp.family_run(source, trace, c), c):
                price = fp.priced_parts(cost, c, s["keys"])
                for k, v in zip(PARTS, (s["forward"], s["products"], s["forward"] - s["products"])):
                    got[c].setdefault(k, []).append(v)
                    got[c].setdefault("p_" + k, []).append(price[k])
    ratio = {}
    for c in concs:
        med = {k: statistics.median(v) * 1e3 for k, v in got[c].items()}
        ratio[c] = {k: med["p_" + k] / med[k] for k in PARTS}
        print(f"concurrency {c}: {len(got[c]['forward'])} steps; " + "; ".join(
            f"{k} {med[k]:.3f} priced {med['p_' + k]:.3f} ({ratio[c][k]:.3f})" for k in PARTS))
    for c in concs[1:]:
        print(f"concurrency {c} over {concs[0]}: " + "; ".join(f"{k} {ratio[c][k] / ratio[concs[0]][k]:.3f}" for k in PARTS))


if __name__ == "__main__":
    main(sys.argv[1:])
