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
from validation.steptime import reprice_groups  # noqa: E402


def group_of(p: dict):
    """A chain, mixed or tree point's group: its model, kind, batch and context."""
    kind = p["kind"].rstrip("0123456789")
    return (p["model"], kind, p["batch"], p["context"]) if kind in ("chain", "mixed", "tree") else None


def main(dirs: list[str]) -> None:
    for d in map(Path, dirs):
        ways = {"as run": {}, "without fused_rows": {"fused_rows": ()}}
        lines, groups = reprice_groups(d, ways, group_of)
        print("\n".join(lines))
        print("  median signed error of each group's kinds, as run / without fused_rows:")
        for (model, kind, b, c), by in sorted(groups.items()):
            print(f"  {model:20} {kind:5} B={b:<3} ctx={c:<5} " + " / ".join(
                f"{100 * statistics.median(by[w]):+5.1f}%" for w in ways))


if __name__ == "__main__":
    main(sys.argv[1:])
