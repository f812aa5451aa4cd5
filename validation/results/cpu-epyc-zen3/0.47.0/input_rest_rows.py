"""Does the fused input's line through rows hold at 32? The calibration's in-situ probe
(validation.reuse.insitu_probe) times the EAGLE head's fused input beyond its product at 1, 4,
16 and 64 rows and prices it as a line through them (input_line: draft_input_us, draft_input_row_us);
the family's traces run 32. Here the same probe at 1, 4, 16, 32 and 64 rows after 128-token prompts
(the family's), three calls, medians, against the line through the calibration's four. Run from
the repository root with the project's environment, alone:

  python validation/results/cpu-epyc-zen3/0.47.0/input_rest_rows.py
"""
from __future__ import annotations

import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))
from validation.calibrate import context_model  # noqa: E402
from validation.reuse import input_line, insitu_probe  # noqa: E402

ROWS, CALIBRATED, CALLS, PROMPT = (1, 4, 16, 32, 64), (1, 4, 16, 64), 3, 128


def main() -> None:
    torch.set_num_threads(1)
    call = insitu_probe(context_model("tiny"), "cpu", ROWS, 20, PROMPT)
    got: dict[int, list[float]] = {}
    for _ in range(CALLS):
        for key, seconds in call().items():
            if key.startswith("reuseinput_rest"):
                got.setdefault(int(key[len("reuseinput_rest"):]), []).append(seconds)
    med = {r: statistics.median(v) for r, v in got.items()}
    for r in ROWS:
        print(f"{r:3d} rows: input rest {med[r] * 1e6:7.1f} us (calls {[round(x * 1e6, 1) for x in got[r]]})")
    fixed, per_row = input_line([(r, med[r]) for r in CALIBRATED])
    print(f"line through {'/'.join(map(str, CALIBRATED))}: {fixed * 1e6:.1f} us + {per_row * 1e6:.3f} us a row; "
          f"at 32: {(fixed + 32 * per_row) * 1e6:.1f} us, measured {med[32] * 1e6:.1f}")


if __name__ == "__main__":
    main()
