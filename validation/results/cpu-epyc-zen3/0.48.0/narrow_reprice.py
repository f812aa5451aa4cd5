"""The narrow-row gather curve's own effect on a step-time grid: the grid's points (the same
engine timings) priced from its calibration as measured and from the same profile without
kv_sizes_narrow and kv_sizes_narrow_warm (every model's gathers on the wide rows' curve, as
the profile reads then); and, third, with the narrow curve and fused_key_ns as the calibration
gives it since 0.48.0: the attention probes' keys (the family's narrow rows) read at the narrow
rows' warm middle rate, not the wide rows', before the rest is taken per key (the profile's
figure moved by the difference of the two reads). Medians, p90 and signed medians of the errors, by model, and the
points where they differ most. It needs the narrow-row curves, which 0.48.0 tried and did not
keep: run it from the repository root at 8dc727f (the commit that had them):

  python validation/results/cpu-epyc-zen3/0.48.0/narrow_reprice.py GRID_DIR [GRID_DIR ...]
"""
from __future__ import annotations

import json
import statistics
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))
from sim.hardware import hardware_from_node  # noqa: E402
from sim.models import model_from_node  # noqa: E402
from sim.specio import Node  # noqa: E402
from validation.probes import ATTN_HEADS, KV_DIM, KV_HEADS, KV_MIDDLE  # noqa: E402
from validation.steptime import ROOT, MODELS, predict  # noqa: E402


def summary(errs):
    a = sorted(abs(e) for e in errs)
    return f"{statistics.median(a):5.1%} / {a[int(0.9 * len(a))]:5.1%} ({statistics.median(errs):+5.1%})"


def main() -> None:
    specs = {(name if not ch else f"{name}-scaled"): replace(model_from_node(Node(name, "steptime", "model"), ROOT), **ch,
                                                             bytes_per_weight=4.0, bytes_per_kv=4.0)
             for name, ch in MODELS["cpu"]}
    for d in map(Path, sys.argv[1:]):
        prof = d / "measured-hardware.yaml"
        hw = hardware_from_node(Node(str(prof), str(prof), "hardware"), ROOT)
        wide = replace(hw, kv_sizes_narrow=(), kv_sizes_narrow_warm=(), kv_row_bytes=0.0, kv_narrow_row_bytes=0.0)
        per_key = 2 * (KV_HEADS // 4) * KV_DIM * 4 / ATTN_HEADS / hw.mem_bw / hw.eta_memory  # a key's K and V at eta 1
        read_wide, read_narrow = per_key / hw.kv_sizes_warm[KV_MIDDLE][1], per_key / hw.kv_sizes_narrow_warm[KV_MIDDLE][1]
        fixed = replace(hw, fused_key_s=max(0.0, hw.fused_key_s + read_wide - read_narrow))
        print(f"{d}: fused_key_ns {hw.fused_key_s * 1e9:.1f} -> {fixed.fused_key_s * 1e9:.1f}")
        points = json.load(open(d / "steptime.json"))["points"]
        got = {}
        for p in points:
            spec = specs[p["model"]]
            got[id(p)] = [(predict(spec, h, {**p, "tree": tuple(p["tree"])}) - p["measured"]) / p["measured"]
                          for h in (hw, wide, fixed)]
        print(f"{d}: median / p90 (signed median) of |error|, narrow curve as measured | without it | narrow, "
              "fused_key read at the narrow rate")
        for model in [None, *specs]:
            sel = [p for p in points if model is None or p["model"] == model]
            print(f"  {model or 'all':22} {summary([got[id(p)][0] for p in sel])} | {summary([got[id(p)][1] for p in sel])} | "
                  f"{summary([got[id(p)][2] for p in sel])}")
        moved = sorted(points, key=lambda p: -abs(got[id(p)][2] - got[id(p)][1]))[:8]
        print("  most moved (without -> narrow -> narrow and its fused_key): " + ", ".join(
            f"{p['model'][:5]} {p['kind']} B={p['batch']} ctx={p['context']} {got[id(p)][1]:+.0%} -> "
            f"{got[id(p)][0]:+.0%} -> {got[id(p)][2]:+.0%}" for p in moved))


if __name__ == "__main__":
    main()
