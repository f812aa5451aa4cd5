"""Step-time grids priced with and without their decode curves, on the same engine timings.

    python validation/results/cpu-epyc-zen3/0.49.0/decode_reprice.py GRID_DIR...

For each grid (the DIR of `python -m validation steptime --out DIR`, measured-hardware.yaml
and steptime.json): the median / p90 of |error| (signed median) of every point, by model, as
run and with kv_decode and kv_decode_warm left out of the profile (every sequence on
kv_sizes, as before 0.49.0); then the family's decode and mixed points one by one."""
import json
import statistics
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))
from sim.hardware import hardware_from_node  # noqa: E402
from sim.models import model_from_node  # noqa: E402
from sim.specio import Node  # noqa: E402
from validation.steptime import MODELS, predict, ROOT  # noqa: E402


def summary(errs: list[float]) -> str:
    a = sorted(abs(x) for x in errs)
    return f"{100 * a[len(a) // 2]:.1f}% / {100 * a[min(len(a) - 1, int(0.9 * len(a)))]:.1f}% ({100 * statistics.median(errs):+.1f}%)"


def main(dirs: list[str]) -> None:
    specs = {}
    for name, changes in MODELS["cpu"]:
        spec = replace(model_from_node(Node(name, "steptime", "model"), ROOT), **changes, bytes_per_weight=4, bytes_per_kv=4)
        specs[f"{spec.name}-scaled" if changes else spec.name] = spec
    for d in map(Path, dirs):
        hw = hardware_from_node(Node(str(d / "measured-hardware.yaml"), "profile", "hardware"), ROOT)
        ways = {"as run": hw, "without kv_decode": replace(hw, kv_decode=(), kv_decode_warm=())}
        points = [p | {"tree": tuple(p["tree"])} for p in json.loads((d / "steptime.json").read_text())["points"]]
        priced = {way: [predict(specs[p["model"]], h, p) for p in points] for way, h in ways.items()}
        for way, times in priced.items():
            errs: dict = {}
            for p, t in zip(points, times):
                e = t / p["measured"] - 1
                errs.setdefault("all", []).append(e)
                errs.setdefault(p["model"], []).append(e)
            print(f"{d.name} {way:18}: " + "; ".join(f"{k} {summary(v)}" for k, v in errs.items()))
        for i, p in enumerate(points):
            if p["model"] == "tiny" and p["kind"] in ("decode", "mixed4"):
                print(f"  {p['kind']:7} B={p['batch']:<3} ctx={p['context']:<5} measured {p['measured'] * 1e3:7.2f} ms  "
                      + "  ".join(f"{way} {priced[way][i] * 1e3:7.2f} ({100 * (priced[way][i] / p['measured'] - 1):+5.1f}%)"
                                  for way in ways))


if __name__ == "__main__":
    main(sys.argv[1:])
