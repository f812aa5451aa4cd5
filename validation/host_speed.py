"""The host's speed around validation's measurements (validation/compare.py, point 6): a reference
loop (validation.timing.host_reference) timed around the calibration's probes (`timed_ticks`) and,
by the engine, after every step; each run tag's speed during its engine runs over the speed the
profile was measured at (`relative_speeds`), every reading weighted by the seconds it covers."""
from __future__ import annotations

import time

REFERENCE_CALLS = 16  # reference loops (about 0.2 ms each) a reading of the host's speed around the probes takes


def relative_speeds(speeds: dict[str, list[tuple[float, float]]],
                    probes: list[tuple[float, float]] | None = None) -> dict[str, float]:
    """Each run tag's host speed during its engine runs over the speed the profile describes:
    `speeds` holds per tag its runs' (duration, speed), `probes` the calibration's ticks'
    (duration, speed), each weighted by its duration; without probes, over the engine runs' mean."""
    mean = _reference_mean(speeds, probes)
    if mean is None:
        return {}
    return {tag: weighted_mean(runs) / mean for tag, runs in speeds.items() if sum(d for d, _ in runs) > 0}


def run_speeds(speeds: dict[str, list[tuple[float, float]]],
               probes: list[tuple[float, float]] | None = None) -> dict[str, list[float]]:
    """Per run tag, each of its engine runs' host speed (in run order) over the speed the profile
    describes (as relative_speeds): whether a run much slower than the others had the host slow
    under it, or was slow on its own."""
    mean = _reference_mean(speeds, probes)
    return {} if mean is None else {tag: [v / mean for _, v in runs] for tag, runs in speeds.items()}


def _reference_mean(speeds: dict[str, list[tuple[float, float]]],
                    probes: list[tuple[float, float]] | None) -> float | None:
    engine = engine_pairs(speeds)
    if not sum(d for d, _ in engine):
        return None
    return weighted_mean(probes or engine)


def engine_pairs(speeds: dict[str, list[tuple[float, float]]]) -> list[tuple[float, float]]:
    """Every engine run's (duration, host speed), all run tags together."""
    return [x for runs in speeds.values() for x in runs]


def weighted_mean(pairs: list[tuple[float, float]]) -> float:
    """The mean of (weight, value) pairs' values, by their weights."""
    return sum(d * v for d, v in pairs) / sum(d for d, _ in pairs)


def reference_speed(calls: int = REFERENCE_CALLS) -> float:
    """The host's speed now: the inverse of the mean seconds of `calls` reference loops after one
    untimed (validation.timing.host_reference, the loop timed after every engine step)."""
    from validation.timing import host_reference, mean_time

    return 1.0 / mean_time(host_reference, "cpu", calls)  # after one untimed call, as after every step


def timed_ticks(ticks, record: list):
    """`ticks` (the calibration's probes between the engine's runs), appending to `record` the
    (seconds, host speed) of each call: the speed the profile was measured at, the reference
    timed before and after the probes."""
    def run():
        before = reference_speed()
        t0 = time.perf_counter()
        ticks()
        record.append((time.perf_counter() - t0, (before + reference_speed()) / 2))
    return run
