"""Whether the calibration's host-time probes swing with the engine's step or apart from it:
ROUNDS rounds, each one call of three probes (validation.calibrate: `layers`, the family-shaped
model at 1 and 6 layers, 10 calls interleaved, their difference a layer, products included;
`forwards`, the hidden-64 probe model's, a layer likewise; `engine`, a whole engine step of 1
sequence) and then one run of the family's `none` at concurrency 1 (the median decode step,
every sequence decoding).

    python validation/results/cpu-epyc-zen4/0.52.0/layers_vs_engine.py [ROUNDS]

One thread, the engine's allocator settings, one untimed round first. Prints each round's
figures and the engine's decode step, then per probe figure its coefficient of variation, its
correlation with the engine's step, and the slope of log step on log figure."""
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))
from validation.calibrate import DEEP, for_trace  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "0.51.0"))
from reference_ab import decode_median, family_engine  # noqa: E402


def main(rounds: int = 12) -> None:
    trace, source, model, _ = family_engine()
    cal = for_trace(trace, source.spec)
    probes = [cal.probes[k] for k in ("layers", "forwards", "engine")]
    for p in probes:
        p()
    decode_median(trace, source, model, 1, None)  # untimed
    names = ("layer", "probe layer", "engine1", "engine step")
    got = []
    for r in range(rounds):
        t = {}
        for p in probes:
            t |= p()
        row = ((t[f"layer{DEEP}"] - t["layer1"]) / (DEEP - 1), (t[f"forward{DEEP}"] - t["forward1"]) / (DEEP - 1),
               t["engine1"], decode_median(trace, source, model, 1, None)[0])
        got.append(row)
        print(f"round {r + 1}: " + ", ".join(f"{n} {v * 1e6:.1f} us" for n, v in zip(names, row)), flush=True)
    a = np.array(got)  # (rounds, 4)
    step = a[:, -1]
    for k, n in enumerate(names):
        v = a[:, k]
        line = f"{n}: coefficient of variation {v.std() / v.mean():.1%}, range {v.min() * 1e6:.0f}-{v.max() * 1e6:.0f} us"
        if k < len(names) - 1:
            line += (f"; correlation with the engine's step {np.corrcoef(v, step)[0, 1]:.2f}, log step on log "
                     f"{n} slope {np.polyfit(np.log(v), np.log(step), 1)[0]:.2f}")
        print(line)


if __name__ == "__main__":
    main(*(int(x) for x in sys.argv[1:]))
