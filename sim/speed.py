"""The device's speed over time: a measured host's slow and fast spells (hardware.speed_rates,
speed_spell_s; validation/calibrate.py measures both), which set the spread of a run's latencies.

Wall-clock time is cut into spells of exponentially distributed length (mean `spell_s`); in a
spell the device runs at a constant rate r (nominal seconds of work per wall second) drawn from
the distribution whose quantiles `speed_rates` lists (at evenly spaced probabilities from 0 to 1,
linear in between), scaled to mean 1, so a long run takes as long on average as the profile's
mean figures say (a calibration's figure is a mean over the calls of its spells). A table, not a
parametric form: this host runs near its top rate most of the time and much slower now and then
(its 100 ms blocks: median 1.09x the mean rate, 5th percentile 0.54x, 1st 0.34x). A step of
nominal duration d starting at wall time t ends when the work done since t reaches d, which may
span spells. The spells come from their own seeded generator, drawn in time order, so a run's
result depends on the times at which steps start and not on how they are grouped (the
simulator's vectorised runs and its step-by-step path agree).
"""
from __future__ import annotations

import math

import numpy as np

BATCH = 256  # spells drawn at a time
QUANTILES = 21  # the calibration's table: rates at probabilities 0, 0.05, ..., 1


def mean_of(quantiles) -> float:
    """Mean of the distribution whose inverse CDF interpolates `quantiles` linearly."""
    q = np.asarray(quantiles, dtype=float)
    return float((q[:-1] + q[1:]).sum() / (2 * (len(q) - 1))) if len(q) > 1 else float(q[0])


class SpeedProcess:
    def __init__(self, quantiles, spell_s: float, seed: int):
        q = np.asarray(quantiles, dtype=float)
        self.table = q / mean_of(q)  # mean rate 1
        self.grid = np.linspace(0.0, 1.0, len(q))  # the quantiles' probabilities
        self.spell = spell_s
        self.rng = np.random.default_rng(np.random.SeedSequence([seed, 0x5BEED]))
        self.ends: list[float] = []  # wall-clock end of each spell drawn so far
        self.rates: list[float] = []
        self.i = 0  # the spell holding the latest time asked about

    def _draw(self) -> None:
        start = self.ends[-1] if self.ends else 0.0
        lengths = self.rng.exponential(self.spell, BATCH)
        u = self.rng.random(BATCH)
        self.ends.extend((start + np.cumsum(lengths)).tolist())
        self.rates.extend(np.interp(u, self.grid, self.table).tolist())

    def stretch(self, now: float, nominal: float) -> float:
        """Wall-clock duration of `nominal` seconds of work starting at wall time `now`."""
        ends, rates = self.ends, self.rates
        i = self.i
        while i > 0 and ends[i - 1] > now:  # a vectorised run cut short: back to its last step
            i -= 1
        while i >= len(ends) or ends[i] <= now:
            if i >= len(ends):
                self._draw()
                continue
            i += 1
        self.i = i
        t, left = now, nominal
        while True:
            if i >= len(ends):
                self._draw()
            room = (ends[i] - t) * rates[i]
            if left <= room:
                return t + left / rates[i] - now
            left -= room
            t = ends[i]
            i += 1

    def stretch_run(self, now: float, nominal: np.ndarray) -> np.ndarray:
        """Wall-clock durations of consecutive steps starting at `now` (a vectorised decode run)."""
        out = np.empty(len(nominal))
        t = now
        for j, d in enumerate(nominal.tolist()):
            out[j] = w = self.stretch(t, d)
            t += w
        return out


def speed_process(hw, seed: int) -> SpeedProcess | None:
    """The hardware's speed process, or None when it runs at a constant speed (every preset)."""
    if hw.speed_rates and hw.speed_spell_s > 0:
        return SpeedProcess(hw.speed_rates, hw.speed_spell_s, seed)
    return None


def spread_of(series, block_s: float) -> tuple[tuple[float, ...], float]:
    """(speed_rates, spell_s) from timings of the host's speed: `series` holds contiguous runs of
    equal blocks, each block's rate (work per wall second, any common scale). speed_rates: the
    QUANTILES quantiles of all blocks' rates over their mean (the runs' differences included:
    spells longer than a run); spell_s: the lag at which the log rates' autocorrelation within
    runs falls to 1/e (exp(-lag / spell) for this process's spells), interpolated between blocks,
    extrapolated from the longest lag when it stays above, and one block when it is below 1/e
    from the first lag on (the blocks' own resolution). ((), 0) when the rates do not vary."""
    runs = [np.log(np.asarray(r, dtype=float)) for r in series if len(r)]
    if sum(len(r) for r in runs) < 4:
        return (), 0.0
    rates = np.exp(np.concatenate(runs))
    rates = rates / rates.mean()
    if np.ptp(rates) <= 1e-12:
        return (), 0.0
    table = tuple(round(float(v), 4) for v in np.quantile(rates, np.linspace(0.0, 1.0, QUANTILES)))
    centre = float(np.concatenate(runs).mean())
    runs = [r - centre for r in runs]
    var = float(np.concatenate(runs).var())
    prev, last = 1.0, 0
    for lag in range(1, max(r.size for r in runs) // 2 + 1):
        pairs = [(r[:-lag], r[lag:]) for r in runs if r.size > lag]
        c = sum(float(a @ b) for a, b in pairs) / sum(a.size for a, _ in pairs) / var
        if c <= 1 / math.e:
            return table, block_s * (lag - 1 + (prev - 1 / math.e) / (prev - c)) if lag > 1 else block_s
        prev, last = c, lag
    return table, block_s * last / -math.log(prev) if last and prev < 1 else block_s
