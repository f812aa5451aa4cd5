"""How a scheme's step grows with the batch, paired run by run: per engine run, the median decode
step at each concurrency over the one at the trace's lowest, against the simulator's draws'
(validation/compare.py writes it as `batch_scaling`).

A step-time error at one concurrency mixes two things: the level of the prices (the profile was
measured at other moments, and this host's speed drifts; the engine's plain decode read 6.0 ms a
step in one spell and 10-12 ms in another, 2026-12-04) and how the price grows with the batch.
The ratio of a scheme's decode steps at two concurrencies measured minutes apart carries the
drift between them. In a run of the trace each scheme now takes its levels back to back
(sim.cli.run_levels' `scheme_major`, since 0.35.0); level by level, as before, a scheme's runs
at 1 and 4 were minutes apart and the per-run ratios of the 0.34.0 comparison spread from 1.18
to 2.13 (draft) and 1.24 to 2.19 (`none`). Alternating 4-request runs at 1 and 4 read the ratio
within about 4% (interquartile range over 21 pairs).

The steps compared are those without a prefill chunk at the batch size the engine's runs at that
level took most often (its steady state; the simulator's at the same size), drafting included.
"""
from __future__ import annotations

import math
import statistics
from collections import Counter

from sim.report import run_tag


def decode_steps(res, column: str = "duration") -> tuple[list[int], list[float]]:
    """(batch sizes, `column`: durations or drafting times) of a run's steps without a prefill chunk."""
    c = res.steps.columns()
    keep = c["prefill_tokens"] == 0
    return c["batch_size"][keep].tolist(), c[column][keep].tolist()


def levels_of(runs: list[dict]) -> dict[str, list[int]]:
    """Per label, the concurrency levels its run tags carry (open-loop runs left out), sorted."""
    out: dict[str, set[int]] = {}
    for by_tag in runs:
        for tag in by_tag:
            label, conc = tag.rsplit("-", 1)
            if conc.isdigit():
                out.setdefault(label, set()).add(int(conc))
    return {label: sorted(cs) for label, cs in out.items()}


def usual_batch(runs: list[dict], tag: str) -> int | None:
    """The batch size the decode steps of `tag` took most often over `runs` (the smallest of equals)."""
    counts = Counter(b for by_tag in runs if tag in by_tag for b in decode_steps(by_tag[tag])[0])
    return min(counts, key=lambda b: (-counts[b], b)) if counts else None


def median_step(res, batch: int, column: str = "duration") -> float | None:
    """The median duration (or `column`) of a run's decode steps at `batch` sequences (None: it took none)."""
    sizes, values = decode_steps(res, column)
    times = [d for b, d in zip(sizes, values) if b == batch]
    return statistics.median(times) if times else None


def ratios(runs: list[dict], tag: str, base_tag: str, batch: int, base_batch: int,
           column: str = "duration") -> list[float]:
    """Per run holding both tags, its median decode step (`column`: its duration, or its drafting
    time) of `tag` at `batch` over that of `base_tag` at `base_batch` (runs without any left out)."""
    out = []
    for by_tag in runs:
        if tag in by_tag and base_tag in by_tag:
            top = median_step(by_tag[tag], batch, column)
            bottom = median_step(by_tag[base_tag], base_batch, column)
            if top is not None and bottom:
                out.append(top / bottom)
    return out


def log_se(xs: list[float]) -> float | None:
    """The standard error of the mean of log(xs): the relative noise of their central value."""
    if len(xs) < 2:
        return None
    logs = [math.log(x) for x in xs]
    return statistics.stdev(logs) / math.sqrt(len(logs))


def batch_scaling(engine: list[dict], sim: list[dict]) -> dict[str, list[dict]]:
    """Per label with two concurrency levels or more, per level above its lowest: the engine's
    runs' ratios (`engine_runs`) of the median decode step at the level over at the lowest, their
    median (`engine`) and the relative standard error of their log mean (`engine_se`), the
    simulator's draws' median ratio (`sim`) at the same batch sizes, and `error` = sim / engine - 1;
    for a scheme that drafts, the same of its drafting time alone (`drafting`: engine, sim,
    error). `engine`, `sim`: per run (draw) a {run tag: RunResult}."""
    out: dict[str, list[dict]] = {}
    for label, levels in levels_of(engine).items():
        base = levels[0]
        base_tag = run_tag(label, base)
        base_batch = usual_batch(engine, base_tag)
        rows = []
        for conc in levels[1:]:
            tag = run_tag(label, conc)
            batch = usual_batch(engine, tag)
            if batch is None or base_batch is None:
                continue
            e, s = ratios(engine, tag, base_tag, batch, base_batch), ratios(sim, tag, base_tag, batch, base_batch)
            if not e or not s:
                continue
            em, sm = statistics.median(e), statistics.median(s)
            row = {"concurrency": conc, "base": base, "batch": batch, "base_batch": base_batch,
                   "engine": em, "engine_runs": e, "engine_se": log_se(e), "sim": sm, "error": sm / em - 1}
            de, ds = (ratios(runs, tag, base_tag, batch, base_batch, "draft_time") for runs in (engine, sim))
            if de and ds:
                dem, dsm = statistics.median(de), statistics.median(ds)
                row["drafting"] = {"engine": dem, "engine_se": log_se(de), "sim": dsm, "error": dsm / dem - 1}
            rows.append(row)
        if rows:
            out[label] = rows
    return out
