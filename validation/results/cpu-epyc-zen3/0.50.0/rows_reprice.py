"""A step-time grid priced with and without its fused_rows curves, on the same engine timings.

    python validation/results/cpu-epyc-zen3/0.50.0/rows_reprice.py GRID_DIR...

For each grid (the DIR of `python -m validation steptime --out DIR`, measured-hardware.yaml
and steptime.json): the median / p90 of |error| (signed median) of every point, by model, as
run and with fused_rows left out of the profile (every sequence with several query tokens at
fused_key_ns, as before 0.50.0); then each model's chain, mixed and tree points by batch and
context: the median error of their kinds, both ways."""
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))
from validation.steptime import by_model, reprice, summary_text  # noqa: E402


def main(dirs: list[str]) -> None:
    for d in map(Path, dirs):
        ways = {"as run": {}, "without fused_rows": {"fused_rows": ()}}
        points, priced = reprice(d, ways)
        groups: dict = {}
        for way, times in priced.items():
            for p, t in zip(points, times):
                e = t / p["measured"] - 1
                kind = p["kind"].rstrip("0123456789")
                if kind in ("chain", "mixed", "tree"):
                    groups.setdefault((p["model"], kind, p["batch"], p["context"]), {}).setdefault(way, []).append(e)
            print(f"{d.name} {way:18}: " + "; ".join(f"{k} {summary_text(v)}" for k, v in by_model(points, times).items()))
        print("  median signed error of each group's kinds, as run / without fused_rows:")
        for (model, kind, b, c), by in sorted(groups.items()):
            print(f"  {model:20} {kind:5} B={b:<3} ctx={c:<5} " + " / ".join(
                f"{100 * statistics.median(by[w]):+5.1f}%" for w in ways))


if __name__ == "__main__":
    main(sys.argv[1:])
