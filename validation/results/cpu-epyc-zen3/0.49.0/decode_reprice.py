"""Step-time grids priced with and without their decode curves, on the same engine timings.

    python validation/results/cpu-epyc-zen3/0.49.0/decode_reprice.py GRID_DIR...

For each grid (the DIR of `python -m validation steptime --out DIR`, measured-hardware.yaml
and steptime.json): the median / p90 of |error| (signed median) of every point, by model, as
run and with kv_decode and kv_decode_warm left out of the profile (every sequence on
kv_sizes, as before 0.49.0); then the family's decode and mixed points one by one."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))
from validation.steptime import by_model, reprice, summary_text  # noqa: E402


def main(dirs: list[str]) -> None:
    for d in map(Path, dirs):
        ways = {"as run": {}, "without kv_decode": {"kv_decode": (), "kv_decode_warm": ()}}
        points, priced = reprice(d, ways)
        for way, times in priced.items():
            print(f"{d.name} {way:18}: " + "; ".join(f"{k} {summary_text(v)}" for k, v in by_model(points, times).items()))
        for i, p in enumerate(points):
            if p["model"] == "tiny" and p["kind"] in ("decode", "mixed4"):
                print(f"  {p['kind']:7} B={p['batch']:<3} ctx={p['context']:<5} measured {p['measured'] * 1e3:7.2f} ms  "
                      + "  ".join(f"{way} {priced[way][i] * 1e3:7.2f} ({100 * (priced[way][i] / p['measured'] - 1):+5.1f}%)"
                                  for way in ways))


if __name__ == "__main__":
    main(sys.argv[1:])
