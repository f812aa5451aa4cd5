"""Where a drafting-time error lies: the simulator's drafting over the engine's by kind of step
(validation/compare.py writes it as `draft_time_by_kind`).

compare's `draft_time` error is a mean over every step. Two kinds of step draft differently:
- `admission`: a step with a prompt's prefill chunk, or the step right after one, in which a
  drafter catches up on the prompt (an MTP module or EAGLE head runs over the prompt's entries);
- `ordinary`: the others, one round of drafting on what the last step committed.
Per run tag, each kind's mean drafting a step on each side over all runs or draws, and for the
ordinary steps also the median: a mean well above the median says a tail of slow steps, which the
two sides may not share. On the sixth VM (0.38.0, cpu-epyc-zen3/0.38.0/step_kinds.txt) MTP's
drafting read 0.88-0.91 at admissions and 0.86-0.89 (means) or 0.91-0.95 (medians) in ordinary
steps, where compare's `draft_time` read -11% to -14%.
"""
from __future__ import annotations

from collections import defaultdict

import numpy as np

KINDS = ("admission", "ordinary")


def step_kinds(prefill_tokens: np.ndarray) -> np.ndarray:
    """(steps,) bool, True for a step of kind `admission`: it or the step before it prefills."""
    pf = prefill_tokens > 0  # (steps,)
    before = np.concatenate([[False], pf[:-1]])  # (steps,)
    return pf | before


def drafting_times(runs: list[dict]) -> dict[str, dict[str, list[float]]]:
    """{run tag: {kind: drafting seconds of each such step}} over `runs` ({run tag: RunResult}),
    run tags whose steps draft nothing left out."""
    out: dict[str, dict[str, list[float]]] = defaultdict(lambda: {k: [] for k in KINDS})
    for by_tag in runs:
        for tag, res in by_tag.items():
            c = res.steps.columns()
            d = np.asarray(c["draft_time"], dtype=float)  # (steps,) seconds
            if not d.size or not d.any():
                continue
            adm = step_kinds(np.asarray(c["prefill_tokens"]))
            out[tag]["admission"].extend(d[adm].tolist())
            out[tag]["ordinary"].extend(d[~adm].tolist())
    return out


def ratio_by_kind(engine: list[dict], sim: list[dict]) -> dict[str, dict[str, dict]]:
    """Per run tag that drafts on both sides, per kind with steps on both: the engine's and the
    simulator's mean drafting a step (`engine_mean`, `sim_mean`, seconds), its ratio (`ratio`),
    the steps on each side (`engine_steps`, `sim_steps`), and for the ordinary steps the medians
    too (`engine_median`, `sim_median`, `median_ratio`). `engine`: the engine's runs, `sim`: the
    simulator's draws, each a {run tag: RunResult}."""
    eng, sims = drafting_times(engine), drafting_times(sim)
    out = {}
    for tag, kinds in eng.items():
        rows = {}
        for kind in KINDS:
            e, s = kinds[kind], sims.get(tag, {}).get(kind, [])
            if not e or not s or np.mean(e) <= 0:
                continue
            row = {"engine_mean": float(np.mean(e)), "sim_mean": float(np.mean(s)),
                   "ratio": float(np.mean(s) / np.mean(e)), "engine_steps": len(e), "sim_steps": len(s)}
            if kind == "ordinary" and np.median(e) > 0:
                row |= {"engine_median": float(np.median(e)), "sim_median": float(np.median(s)),
                        "median_ratio": float(np.median(s) / np.median(e))}
            rows[kind] = row
        if rows:
            out[tag] = rows
    return out


def kind_line(tag: str, rows: dict) -> str:
    """One printed line of a run tag's drafting by kind."""
    cells = []
    for kind, r in rows.items():
        cell = f"{kind} {r['ratio']:.3f} ({r['engine_mean'] * 1e3:.2f} ms engine, {r['engine_steps']} steps)"
        if "median_ratio" in r:
            cell += f", median {r['median_ratio']:.3f}"
        cells.append(cell)
    return f"{tag}: simulator over engine drafting a step: " + "; ".join(cells)
