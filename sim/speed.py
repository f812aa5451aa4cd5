"""The device's speed over time: a measured host's slow and fast spells (hardware.speed_sigma,
speed_spell_s; validation/calibrate.py measures both), which set the spread of a run's latencies.

Wall-clock time is cut into spells of exponentially distributed length (mean `spell_s`); in a
spell the device runs at a constant rate r (nominal seconds of work per wall second), r lognormal
with log-σ `sigma` and mean 1, so a long run takes as long on average as the profile's mean
figures say (a calibration's figure is a mean over the calls of its spells). A step of nominal
duration d starting at wall time t ends when the work done since t reaches d, which may span
spells. The spells come from their own seeded generator, drawn in time order, so a run's result
depends on the times at which steps start and not on how they are grouped (the simulator's
vectorised runs and its step-by-step path agree).
"""
from __future__ import annotations

import math

import numpy as np

BATCH = 256  # spells drawn at a time


class SpeedProcess:
    def __init__(self, sigma: float, spell_s: float, seed: int):
        self.sigma, self.spell = sigma, spell_s
        self.rng = np.random.default_rng(np.random.SeedSequence([seed, 0x5BEED]))
        self.ends: list[float] = []  # wall-clock end of each spell drawn so far
        self.rates: list[float] = []
        self.i = 0  # the spell holding the latest time asked about

    def _draw(self) -> None:
        start = self.ends[-1] if self.ends else 0.0
        lengths = self.rng.exponential(self.spell, BATCH)
        z = self.rng.standard_normal(BATCH)
        self.ends.extend((start + np.cumsum(lengths)).tolist())
        self.rates.extend(np.exp(self.sigma * z - 0.5 * self.sigma ** 2).tolist())

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
    if hw.speed_sigma > 0 and hw.speed_spell_s > 0:
        return SpeedProcess(hw.speed_sigma, hw.speed_spell_s, seed)
    return None


def spread_of(series, block_s: float) -> tuple[float, float]:
    """(sigma, spell_s) from timings of the host's speed: `series` holds contiguous runs of
    equal blocks, each block's rate (work per wall second, any common scale). sigma is the spread
    of the log rates around their mean over all runs (the runs' differences included: spells
    longer than a run); spell_s the lag at which their autocorrelation within runs, about that
    same mean, falls to 1/e (exp(-lag / spell) for this process's spells), interpolated between
    blocks, or extrapolated from the longest lag when it stays above 1/e. (0, 0) when the rates do
    not vary; spell_s 0 when they do not persist from one block to the next."""
    runs = [np.log(np.asarray(r, dtype=float)) for r in series if len(r)]
    if sum(len(r) for r in runs) < 4:
        return 0.0, 0.0
    mean_rate = float(np.mean(np.exp(np.concatenate(runs))))
    runs = [r - math.log(mean_rate) for r in runs]
    allx = np.concatenate(runs)
    sigma = float(allx.std())
    if sigma == 0.0:
        return 0.0, 0.0
    centre = allx.mean()
    runs = [r - centre for r in runs]
    var = float(allx.var())
    prev, longest = 1.0, max(len(r) for r in runs) // 2
    for lag in range(1, max(2, longest + 1)):
        pairs = [(r[:-lag], r[lag:]) for r in runs if len(r) > lag]
        if not pairs:
            break
        c = sum(float(a @ b) for a, b in pairs) / sum(len(a) for a, _ in pairs) / var
        if c <= 1 / math.e:
            if lag == 1:
                return sigma, 0.0
            return sigma, block_s * (lag - 1 + (prev - 1 / math.e) / (prev - c))
        prev, last = c, lag
    if prev >= 1.0:
        return sigma, 0.0
    return sigma, block_s * last / -math.log(prev)
