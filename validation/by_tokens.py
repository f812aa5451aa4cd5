"""Where a step-time error lies: the simulator's step time over the engine's, by query tokens per
pass (validation/compare.py writes it as `step_time_by_tokens`).

A comparison's step-time error mixes steps of every size: a scheme's decodes (one token a
sequence), its chains (a few) and its trees (up to 64 a sequence). The steps without a prefill
chunk are matched between the engine's runs and the simulator's draws on (scheme label, batch
size, query tokens), their drafting time left out (compared on its own as `draft_time`), and per
bin of query tokens the ratio is the simulator's mean time of each matched step shape, weighted by
how many times the engine took it, over the engine's time in those steps. A ratio that falls with
the tokens says the price of a pass's fixed part and of its growth per token are off in opposite
directions. On the fifth VM (0.26.0, `traces/family-schemes.yaml`, 8 engine runs) it read 1.14,
1.09 and 0.99 for passes of 1-4, 5-16 and 17-64 tokens at concurrency 1, and 1.10, 1.10, 1.07,
0.91 and 0.90 up to 512 tokens at concurrency 4: the tree schemes' error against the chains'.
"""
from __future__ import annotations

from collections import defaultdict

import numpy as np

# (lowest, highest) query tokens per pass of each bin, the last open-ended (None)
TOKEN_BINS = ((1, 4), (5, 16), (17, 64), (65, 128), (129, None))


def step_times(runs: list[dict]) -> dict[str, dict[tuple, list[float]]]:
    """Per concurrency (the run tag's suffix: "open" without a sweep level), the durations less drafting of the steps without a
    prefill chunk, keyed by (label, batch size, query tokens), over `runs` ({run tag: RunResult})."""
    out: dict[str, dict[tuple, list[float]]] = defaultdict(lambda: defaultdict(list))
    for by_tag in runs:
        for tag, res in by_tag.items():
            label, conc = tag.rsplit("-", 1)
            c = res.steps.columns()
            keep = c["prefill_tokens"] == 0
            d = (c["duration"] - c["draft_time"])[keep]  # (steps,) seconds
            for b, q, t in zip(c["batch_size"][keep].tolist(), c["query_tokens"][keep].tolist(), d.tolist()):
                out[conc][(label, int(b), int(q))].append(t)
    return out


def ratio_by_tokens(engine: list[dict], sim: list[dict], bins=TOKEN_BINS) -> dict[str, list[dict]]:
    """Per concurrency, per bin of query tokens with matched steps: the simulator's time over the
    engine's (`ratio`), the engine's seconds in those steps per run (`engine_s`) and its steps
    matched (`steps`). `engine`: the engine's runs, `sim`: the simulator's draws, each a {run
    tag: RunResult}."""
    eng, sims = step_times(engine), step_times(sim)
    out = {}
    for conc, shapes in eng.items():
        rows = []
        for lo, hi in bins:
            e_sum = s_sum = 0.0
            n = 0
            for key, times in shapes.items():
                s = sims.get(conc, {}).get(key)
                if s and lo <= key[2] and (hi is None or key[2] <= hi):
                    e_sum += sum(times)
                    s_sum += float(np.mean(s)) * len(times)
                    n += len(times)
            if n and e_sum > 0:
                rows.append({"tokens": [lo, hi], "ratio": s_sum / e_sum, "engine_s": e_sum / len(engine), "steps": n})
        out[conc] = rows
    return out
