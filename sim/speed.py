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

A profile may add a slow drift of the same form (hardware.speed_drift_rates, speed_drift_s):
the rate is then the product of the two, each of mean 1. The calibration measures the fast
spells within its 2-second windows (each block over its window's mean) and the drift between
windows (their means, `drift_of`): this host is slower for whole seconds now and then (one of
eight engine runs of a scheme at 0.6x the others), on top of stalls within a window, and one
spell length cannot follow both (estimated over all blocks at once it read 100 to 786 ms).
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


class Spells:
    """One component of the speed: wall-clock spells of exponentially distributed length (mean
    `spell_s`), each at a rate drawn from `quantiles` scaled to mean 1, drawn in time order."""

    def __init__(self, quantiles, spell_s: float, rng: np.random.Generator):
        q = np.asarray(quantiles, dtype=float)
        self.table = q / mean_of(q)  # mean rate 1
        self.grid = np.linspace(0.0, 1.0, len(q))  # the quantiles' probabilities
        self.spell = spell_s
        self.rng = rng
        self.ends: list[float] = []  # wall-clock end of each spell drawn so far
        self.rates: list[float] = []

    def draw(self) -> None:
        first = not self.ends
        start = self.ends[-1] if self.ends else 0.0
        lengths = self.rng.exponential(self.spell, BATCH)
        u = self.rng.random(BATCH)
        self.ends.extend((start + np.cumsum(lengths)).tolist())
        rates = np.interp(u, self.grid, self.table)
        if first:  # the spell a run starts in: drawn in proportion to the work done in it
            rates[0] = self.work_weighted(u[0])
        self.rates.extend(rates.tolist())

    def work_weighted(self, u: float) -> float:
        """The rate at probability u of the distribution weighted by rate (a spell's share of
        the work done). A run started after others finished (an engine run, a calibration
        probe's call) lands in a spell in proportion to the work done in it, not the time it
        lasts: without this, a run shorter than the spells would take E[1/r] (above 1) times
        its nominal time on average, where the engine's runs and the profile's figures, both
        work-driven, take their nominal time."""
        fine = np.linspace(0.0, 1.0, 4097)
        r = np.interp(fine, self.grid, self.table)
        cdf = np.concatenate(([0.0], np.cumsum((r[1:] + r[:-1]) / 2)))
        return float(np.interp(u * cdf[-1], cdf, r))

    def at(self, i: int) -> tuple[float, float]:
        """(end, rate) of spell i, drawing as far as needed."""
        while i >= len(self.ends):
            self.draw()
        return self.ends[i], self.rates[i]


class SpeedProcess:
    """The device's rate over wall time: the product of independent components of mean 1, the
    fast spells (`quantiles`, `spell_s`) and optionally a slow drift of the same form (`drift`:
    (quantiles, spell_s)), each from its own seeded generator. Their product is kept as one
    sequence of segments (a segment ends where any component's spell does)."""

    def __init__(self, quantiles, spell_s: float, seed: int, drift: tuple | None = None):
        self.parts = [Spells(quantiles, spell_s, np.random.default_rng(np.random.SeedSequence([seed, 0x5BEED])))]
        if drift is not None:
            self.parts.append(Spells(drift[0], drift[1], np.random.default_rng(np.random.SeedSequence([seed, 0xD21F7]))))
        self.ends: list[float] = []  # wall-clock end of each segment merged so far
        self.rates: list[float] = []  # the product of the components' rates in it
        self._next = [0] * len(self.parts)  # each component's spell the next segment lies in
        self.i = 0  # the segment holding the latest time asked about

    def _merge(self) -> None:
        """BATCH more segments of the product."""
        parts, idx = self.parts, self._next
        for _ in range(BATCH):
            spells = [sp.at(i) for sp, i in zip(parts, idx)]
            end = min(e for e, _ in spells)
            self.ends.append(end)
            self.rates.append(math.prod(r for _, r in spells))
            idx = [i + 1 if e == end else i for i, (e, _) in zip(idx, spells)]
        self._next = idx

    def stretch(self, now: float, nominal: float) -> float:
        """Wall-clock duration of `nominal` seconds of work starting at wall time `now`."""
        ends, rates = self.ends, self.rates
        i = self.i
        while i > 0 and ends[i - 1] > now:  # a vectorised run cut short: back to its last step
            i -= 1
        while i >= len(ends) or ends[i] <= now:
            if i >= len(ends):
                self._merge()
                continue
            i += 1
        self.i = i
        t, left = now, nominal
        while True:
            if i >= len(ends):
                self._merge()
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
        drift = (hw.speed_drift_rates, hw.speed_drift_s) if hw.speed_drift_rates and hw.speed_drift_s > 0 else None
        return SpeedProcess(hw.speed_rates, hw.speed_spell_s, seed, drift)
    return None


def quantile_table(rates: np.ndarray) -> tuple[float, ...]:
    """The QUANTILES quantiles of `rates`, as a profile lists them."""
    return tuple(round(float(v), 4) for v in np.quantile(rates, np.linspace(0.0, 1.0, QUANTILES)))


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
    table = quantile_table(rates)
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


def window_log_var(quantiles, spell_s: float, window_s: float, windows: int = 2000, seed: int = 0) -> float:
    """Variance of the log of the mean rate over a window of `window_s` seconds that fast spells
    (`quantiles`, `spell_s`) give by themselves: `windows` windows of one seeded run of them, each
    a few spells after the last (a window's mean rate is the work done in it over its length)."""
    sp = Spells(quantiles, spell_s, np.random.default_rng(np.random.SeedSequence([seed, 0x3A1F])))
    stride = window_s + 5 * spell_s
    starts = np.arange(windows) * stride
    while not sp.ends or sp.ends[-1] < starts[-1] + window_s:
        sp.draw()
    ends, rates = np.asarray(sp.ends), np.asarray(sp.rates)
    edges = np.concatenate(([0.0], ends))
    work = np.concatenate(([0.0], np.cumsum(rates * np.diff(edges))))  # work done by each spell's end
    mean = (np.interp(starts + window_s, edges, work) - np.interp(starts, edges, work)) / window_s
    return float(np.log(mean).var())


def drift_of(windows, block_s: float, within: tuple | None = None) -> tuple[tuple[float, ...], float]:
    """(speed_drift_rates, speed_drift_s) from windows of block rates taken at various moments,
    `windows` = [(start seconds, [block rates])]. A window's mean rate is its drift level times
    the mean of its own fast spells, which the simulator draws again on top of the drift: with
    `within` = (speed_rates, speed_spell_s), those fast spells, the windows' log means vary by the
    levels' variance plus what the spells give a window's mean (`window_log_var`), so the levels'
    variance is the means' less it (none left: no drift; without `within`, nothing is taken), and
    speed_drift_rates are the QUANTILES quantiles of the means' log deviations shrunk by the
    ratio of the two spreads, over their mean. speed_drift_s: the mean length of the spells of a
    process whose log level correlates as exp(-gap / spell) between windows `gap` seconds apart
    (maximum likelihood for consecutive windows' log means, jointly normal with the levels'
    covariance plus the spells' noise; at least a window's length, since what varies within a
    window is the fast spells'). ((), 0) with fewer than three windows, or no drift."""
    ws = sorted((float(t), float(np.mean(r)), len(r)) for t, r in windows if len(r))
    if len(ws) < 3:
        return (), 0.0
    means = np.array([m for _, m, _ in ws])
    if np.ptp(means / means.mean()) <= 1e-12:
        return (), 0.0
    x = np.log(means) - np.log(means).mean()
    v = float(x.var())
    floor = max(n for _, _, n in ws) * block_s  # a window's length
    level = v - (window_log_var(within[0], within[1], floor) if within and within[0] and within[1] > 0 else 0.0)
    if level <= 1e-6 * v:
        return (), 0.0
    shrunk = np.exp(x * math.sqrt(level / v))
    table = quantile_table(shrunk / shrunk.mean())
    gaps = np.diff([t for t, _, _ in ws])
    a, b = x[:-1], x[1:]

    def nll(spell: float) -> float:
        beta = level * np.exp(-gaps / spell) / v  # E[b | a] = beta * a
        s2 = np.maximum(v * (1.0 - beta ** 2), 1e-12 * v)
        return float(np.sum(np.log(s2) + (b - beta * a) ** 2 / s2))

    grid = np.geomspace(floor, max(floor * 10, 1e4), 400)
    return table, float(grid[int(np.argmin([nll(s) for s in grid]))])
