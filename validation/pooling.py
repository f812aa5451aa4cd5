"""Pooling several runs of one trace (the engine's repeats, the simulator's draws) into one report,
and the spreads that say how far a pooled figure could move by chance (validation/compare.py,
points 1, 3 and 7): the schemes' order rotated between the engine's runs (`rotated`), the runs
pooled as if they had run end to end (`pool_runs`), the simulator's percentiles taken over groups
of as many draws as the engine ran (`group_percentiles`), each run's own p99 and their median
(`median_p99`), the engine's run-to-run spread
(`run_spread`) and the profile's (`profile_spread`, `figure_noise`)."""
from __future__ import annotations

import copy
from dataclasses import replace

import numpy as np

from sim.metrics import dist, latencies, request_arrays
from sim.report import acceptance_entry, fill_speedups, run_tag
from validation.measure import add_counts, drafted_counts


def run_spread(throughputs: list[float]) -> float | None:
    """The relative standard error of a pooled throughput (all runs' tokens over all their time)
    from its runs' throughputs, each run generating the same tokens: its durations' standard
    deviation over their mean, over sqrt(runs). None from fewer than two runs. An error within
    about twice it is one the engine's own runs cannot tell from zero."""
    if len(throughputs) < 2 or min(throughputs) <= 0:
        return None
    d = 1.0 / np.asarray(throughputs, dtype=float)  # each run's duration per token
    return float(d.std(ddof=1) / d.mean() / np.sqrt(len(d)))


def profile_spread(reports: list[dict]) -> dict[str, float]:
    """Per run tag, the relative standard deviation of the simulator's throughput over `reports`
    (its runs on the calibration's bootstrap profiles, one draw each): how much of an error the
    profile's own noise could make. Two reports at least."""
    if len(reports) < 2:
        return {}
    tputs: dict[str, list[float]] = {}
    for rep in reports:
        for r in rep["runs"]:
            tputs.setdefault(run_tag(r["label"], r["concurrency"]), []).append(r["summary"]["throughput_tok_s"])
    return {tag: float(np.std(v, ddof=1) / np.mean(v)) for tag, v in tputs.items() if np.mean(v) > 0}


def figure_noise(figures: list[dict]) -> dict[str, float]:
    """Each scalar figure's relative standard deviation over the bootstrap profiles' `figures`
    (fields that are zero throughout left out)."""
    out = {}
    for k, v in figures[0].items():
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            xs = np.array([f[k] for f in figures], dtype=float)
            if abs(xs.mean()) > 0:
                out[k] = round(float(xs.std(ddof=1) / abs(xs.mean())), 4)
    return out


def rotated(trace, i: int, repeats: int):
    """The trace with its schemes' order rotated for the i-th of `repeats` engine runs (by i x
    schemes / repeats, rounded; the first run keeps the trace's order), so that over the runs
    each scheme takes turns early and late in a run of the trace, and a drift within the runs is
    not read as a scheme's. In 0.25.0's comparisons (a fixed order) the host read slower the
    later a scheme ran (the reference's speed -10 to -16% for the last three of nine at
    concurrency 1, 4 and 16, +0 to +2% for the first); rotated, in 0.26.0's, the pattern stayed
    with the schemes (at 4: Medusa -11.6%, EAGLE-2 -10.0%, `none` -3.9%), so it is theirs, not
    their place (nine copies of `none` in one trace read no trend with place). Each run's own
    report (DIR/engine/runN) lists the schemes, and takes its speedups' baseline, in the order
    that run took them; the pooled comparison keeps the trace's."""
    spec = list(trace.speculation)
    k = round(i * len(spec) / max(1, repeats)) % max(1, len(spec))
    return replace(trace, speculation=tuple(spec[k:] + spec[:k])) if k else trace


def pool_runs(reports: list[dict], results: list[dict]) -> dict:
    """One report from several runs of the same trace (the engine's runs, or the simulator's
    draws), pooled as if they had run end to end, so that the machine's slow and fast spells
    weigh by the time they took (the profile the simulator is priced with is a mean over the
    same minutes). Per scheme and concurrency:
    throughput is every run's output tokens over their summed durations, TTFT and TPOT
    percentiles are over every run's requests, duration, steps, allocator operations and peak
    pages are means, and the accepted-drafts histogram sums the runs' (counted as the simulator
    drafts: validation.measure.drafted_counts). `results`: each run's {run tag: RunResult}.
    `run_p99` holds each run's own TTFT and TPOT p99, the median over the runs (median_p99).
    Each entry keeps every run's throughput, its speedup is over the pooled first scheme's at
    the same concurrency; the summary's other fields are the first run's."""
    merged = dict(reports[0])
    runs = []
    by_run = [{run_tag(r["label"], r["concurrency"]): r for r in rep["runs"]} for rep in reports]
    for first in reports[0]["runs"]:
        tag = run_tag(first["label"], first["concurrency"])
        same = [mine[tag] for mine in by_run]  # the same scheme and concurrency, in whatever order each ran
        res = [by_tag[tag] for by_tag in results]
        n = len(same)
        s = copy.deepcopy(first["summary"])
        dur = sum(r["summary"]["duration_s"] for r in same)
        s["duration_s"] = dur / n
        s["throughput_tok_s"] = sum(r["summary"]["output_tokens"] for r in same) / dur
        lat = [latencies(request_arrays(x)) for x in res]
        s["ttft_s"] = dist(np.concatenate([t for t, _ in lat]))
        s["tpot_s"] = dist(np.concatenate([p for _, p in lat]))
        s["run_p99"] = {"ttft_s": median_p99([t for t, _ in lat]), "tpot_s": median_p99([p for _, p in lat])}
        s["steps"] = sum(r["summary"]["steps"] for r in same) / n
        s["draft_s"] = sum(r["summary"]["draft_s"] for r in same) / n
        for key in ("page_allocs", "page_frees", "peak_pages"):
            s["allocator"][key] = sum(r["summary"]["allocator"][key] for r in same) / n
        s["pooled_runs"] = n
        entry = {**first, "summary": s, "throughputs": [r["summary"]["throughput_tok_s"] for r in same]}
        counts: dict = {}
        for x in res:
            add_counts(counts, drafted_counts(x))
        if counts:
            entry["acceptance"] = acceptance_entry(counts)
        runs.append(entry)
    fill_speedups(runs, runs[0]["label"])
    merged["runs"] = runs
    return merged


def median_p99(runs: list[np.ndarray]) -> float | None:
    """The median over `runs` (each run's latencies, seconds) of each run's own p99, over the runs
    that have any (None if none has). The tail a run of the trace shows, robust to one run much
    slower than the rest: a p99 over all the runs' requests pooled is the slowest run's tail
    (one engine run of eight 1.3-1.6x slower than the others carried all of 0.43.0's TPOT p99
    misses)."""
    return median_present([np.percentile(r, 99) if len(r) else None for r in runs])


def median_present(values: list) -> float | None:
    """The median of `values` that are not None (None if none is)."""
    kept = [v for v in values if v is not None]
    return float(np.median(kept)) if kept else None


def group_percentiles(pooled: dict, groups: list[dict]) -> dict:
    """`pooled` (pool_runs over all the simulator's draws) with each run's TTFT and TPOT
    percentiles replaced by their mean over `groups` (pool_runs over consecutive groups of as many
    draws as the engine ran): what the engine's pooled percentile reads over its requests, had it
    run as the simulator draws. A p99 over fewer requests reads lower in a long tail: over 64,
    about the 97.5th percentile, over 256 about the 98.6th (k / (n + 1) at its rank k)."""
    if not groups:
        return pooled
    for i, run in enumerate(pooled["runs"]):
        for key in ("ttft_s", "tpot_s"):
            per = [g["runs"][i]["summary"][key] for g in groups]
            run["summary"][key] = {k: (None if any(d[k] is None for d in per) else float(np.mean([d[k] for d in per])))
                                   for k in per[0]}
    return pooled
