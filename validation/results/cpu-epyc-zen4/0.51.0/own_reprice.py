"""A step-time grid priced with and without its fused_own curve, on the same engine timings.

    python validation/results/cpu-epyc-zen4/0.51.0/own_reprice.py GRID_DIR...

For each grid (the DIR of `python -m validation steptime --out DIR`, measured-hardware.yaml and
steptime.json): the median / p90 of |error| (signed median) of every point, by model, as run
and with fused_own left out of the profile (the calls a sequence takes alone priced with the
others on fused_rows and fused_key_ns, as before 0.51.0); then the points with such calls, each
model's one-sequence chains and trees by context and its prefill chunks: their errors both ways."""
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))
from validation.steptime import reprice_groups, work_of  # noqa: E402


def group_of(p: dict):
    """A point with a call of a sequence's own: its model, prefill or one sequence, and context."""
    if not work_of(p).own_seqs:
        return None
    return p["model"], "prefill" if p["kind"].startswith("prefill") else "one sequence", p["context"]


def main(dirs: list[str]) -> None:
    for d in map(Path, dirs):
        ways = {"as run": {}, "without fused_own": {"fused_own": ()}}
        lines, groups = reprice_groups(d, ways, group_of)
        print("\n".join(lines))
        print("  the points with a call of a sequence's own: median signed error [each point's], as run / without fused_own:")
        for (model, kind, c), by in sorted(groups.items()):
            print(f"  {model:20} {kind:12} ctx={c:<5} " + " / ".join(
                f"{100 * statistics.median(by[w]):+5.1f}% [{' '.join(f'{100 * e:+.0f}' for e in by[w])}]" for w in ways))


if __name__ == "__main__":
    main(sys.argv[1:])
