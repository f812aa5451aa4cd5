"""The device's speed over time (sim/speed.py): a seeded process of slow and fast spells whose
mean rate is 1, the simulator's use of it, and the estimator the calibration measures it with."""
import math

import numpy as np
import pytest

from sim.simulator import simulate
from sim.speed import QUANTILES, SpeedProcess, drift_of, mean_of, speed_process, spread_of
from sim.workload import make_requests
from tests.helpers import make_trace

SKEWED = (0.1, 0.5, 0.9, 1.1, 1.15)  # mostly near the top rate, slow now and then (as this host)
JITTER = {"preset": "h100-sxm", "speed_rates": list(SKEWED), "speed_spell_ms": 40.0}


def test_constant_rate_is_the_identity_and_presets_have_none(tmp_path):
    p = SpeedProcess((2.0, 2.0), 0.5, seed=1)  # scaled to mean 1
    t = 0.0
    for d in (0.01, 0.3, 2.0, 1e-6):
        assert p.stretch(t, d) == pytest.approx(d, rel=1e-12)
        t += d
    assert speed_process(make_trace(tmp_path).hardware, 1) is None


def test_rates_follow_the_quantiles_scaled_to_mean_one():
    assert mean_of((0.0, 1.0)) == pytest.approx(0.5) and mean_of((1.0, 1.0, 4.0)) == pytest.approx(1.75)
    p = SpeedProcess(SKEWED, 0.1, seed=3).parts[0]
    while len(p.rates) < 50_000:
        p.draw()
    r = np.array(p.rates)
    assert r.mean() == pytest.approx(1.0, abs=0.01)
    table = np.array(SKEWED) / mean_of(SKEWED)
    assert np.quantile(r, [0.25, 0.5, 0.75]) == pytest.approx(table[1:4], rel=0.02)


def test_work_is_conserved_across_spells_and_the_mean_rate_is_one():
    """A step's wall time is its work at each spell's rate; over many spells wall ~ work."""
    p = SpeedProcess(SKEWED, 0.05, seed=4)
    t, work = 0.0, 0.0
    walls = []
    for _ in range(40_000):
        w = p.stretch(t, 0.002)
        walls.append(w)
        t, work = t + w, work + 0.002
    assert t / work == pytest.approx(1.0, abs=0.05)
    assert np.std(np.log(walls)) > 0.2  # steps really do vary
    # one long step equals the same work cut in pieces, started at the same moment
    q1, q2 = SpeedProcess(SKEWED, 0.05, seed=9), SpeedProcess(SKEWED, 0.05, seed=9)
    whole = q1.stretch(1.0, 0.5)
    t = 1.0
    for _ in range(50):
        t += q2.stretch(t, 0.01)
    assert t - 1.0 == pytest.approx(whole, rel=1e-9)


def test_a_drift_multiplies_the_spells_keeping_the_mean():
    """With a slow drift the rate is the product of the two components: the mean rate stays 1,
    work is conserved across both kinds of boundary, and the fast spells are the same draws."""
    drift = ((0.5, 1.0, 1.2), 2.0)
    p = SpeedProcess(SKEWED, 0.05, seed=4, drift=drift)
    t, work = 0.0, 0.0
    for _ in range(60_000):
        t += p.stretch(t, 0.002)
        work += 0.002
    assert t / work == pytest.approx(1.0, abs=0.06)
    q1, q2 = SpeedProcess(SKEWED, 0.05, seed=9, drift=drift), SpeedProcess(SKEWED, 0.05, seed=9, drift=drift)
    whole = q1.stretch(1.0, 3.0)
    t = 1.0
    for _ in range(300):
        t += q2.stretch(t, 0.01)
    assert t - 1.0 == pytest.approx(whole, rel=1e-9)
    # the product, spell by spell: the wall time of a step inside one spell of each component
    r = SpeedProcess(SKEWED, 0.05, seed=5, drift=drift)
    fast, slow = r.parts
    fast.at(0), slow.at(0)
    end = min(fast.ends[0], slow.ends[0])
    assert r.stretch(0.0, 0.5 * end * fast.rates[0] * slow.rates[0]) == pytest.approx(0.5 * end, rel=1e-12)
    assert SpeedProcess(SKEWED, 0.05, seed=5).parts[0].at(3) == fast.at(3)


def test_a_run_starts_in_a_spell_weighted_by_its_work():
    """The spell holding t = 0 has its rate drawn in proportion to rate (runs start after other
    work finished): a run shorter than a spell then takes its nominal time on average, E[1/r]
    = 1 / E[r] = 1, where a spell drawn in proportion to time would give E[1/r] > 1."""
    table = np.array(SKEWED) / mean_of(SKEWED)
    first = np.array([SpeedProcess(SKEWED, 100.0, seed=k).parts[0].at(0)[1] for k in range(4000)])
    assert np.mean(1.0 / first) == pytest.approx(1.0, abs=0.03)
    spells = SpeedProcess(SKEWED, 1.0, seed=1).parts[0]
    spells.at(20_000)
    later = np.array(spells.rates[1:])
    assert np.mean(1.0 / later) > 1.3 and np.mean(later) == pytest.approx(1.0, abs=0.02)
    assert first.min() >= table[0] - 1e-12 and first.max() <= table[-1] + 1e-12


def test_a_run_cut_short_goes_back_to_its_last_step():
    """The simulator prices a decode run, then may cut it at the next arrival: the next step
    starts before the times the run asked about and must see the spell it starts in."""
    a, b = SpeedProcess(SKEWED, 0.02, seed=2), SpeedProcess(SKEWED, 0.02, seed=2)
    run = a.stretch_run(0.0, np.full(200, 0.003))
    cut = float(run[:50].sum())
    assert a.stretch(cut, 0.003) == pytest.approx(b.stretch(cut, 0.003), rel=1e-12)
    t = 0.0
    for j in range(50):
        assert run[j] == pytest.approx(b.stretch(t, 0.003), rel=1e-12)
        t += run[j]


def _windows(levels, spells: SpeedProcess, gap: float, call: float = 0.002):
    """Windows of 20 blocks of 0.1 s of `spells` (calls of `call` seconds' work, as the
    calibration's speed probe times them), every `gap` seconds, each times its level."""
    out, t = [], 0.0
    for lv in levels:
        rates = []
        for _ in range(20):  # a block's rate: the work done in it over its length, from its calls
            end, n, tt = t + 0.1, 0, t
            while (w := spells.stretch(tt, call)) + tt <= end:
                tt, n = tt + w, n + 1
            rates.append(lv * n / (tt - t))
            t = end
        out.append((t, rates))
        t += gap
    return out


@pytest.mark.parametrize("spell", [1.0, 0.3])
def test_spread_of_recovers_the_process(spell):
    """Windows of 20 blocks of 0.1 s, as the calibration's speed probe times them."""
    p = SpeedProcess(SKEWED, spell, seed=11)
    windows = [r for _, r in _windows(np.ones(60), p, 5.0, call=0.001)]
    table, tau = spread_of(windows, 0.1)
    assert len(table) == QUANTILES and table[0] <= table[10] <= table[-1]
    truth = np.array(SKEWED) / mean_of(SKEWED)
    assert table[10] == pytest.approx(truth[2], rel=0.1)  # the median
    assert table[2] < 0.8 * table[10]  # the slow tail (10th percentile; 1/8 of the blocks are below 0.5)
    assert tau == pytest.approx(spell, rel=0.5)
    assert spread_of([[2.0] * 10], 0.1) == ((), 0.0)
    rng = np.random.default_rng(0)  # independent blocks: a spread, spells no longer than a block
    table, tau = spread_of([np.exp(0.2 * rng.standard_normal(400))], 0.1)
    assert table[-1] > 1.3 * table[0] and tau == 0.1


@pytest.mark.parametrize("drift", [6.0, 40.0])
def test_drift_of_recovers_the_slow_spells(drift):
    """Windows of 20 blocks every 10 s of a process whose window means drift in spells of
    `drift` seconds (log-normal levels, AR(1) between windows): the spell and the spread of the
    levels come back; fast jitter within the windows does not count as drift."""
    rng = np.random.default_rng(3)
    n, gap, sd = 300, 10.0, 0.25
    level = np.empty(n)
    level[0] = rng.standard_normal() * sd
    for i in range(1, n):
        rho = np.exp(-gap / drift)
        level[i] = rho * level[i - 1] + np.sqrt(1 - rho ** 2) * sd * rng.standard_normal()
    windows = [(i * gap, list(np.exp(level[i]) * np.exp(0.3 * rng.standard_normal(20)))) for i in range(n)]
    table, spell = drift_of(windows, 0.1)
    assert spell == pytest.approx(drift, rel=0.4)
    assert len(table) == QUANTILES
    assert log_sd(table) == pytest.approx(sd, rel=0.15)  # no fast spells given: the means' spread
    assert drift_of(windows[:2], 0.1) == ((), 0.0)
    assert drift_of([(i, [1.0, 1.0]) for i in range(5)], 0.1) == ((), 0.0)
    # independent windows: the spell is no longer than a window (2 s here)
    flat = [(i * gap, list(np.exp(0.2 * rng.standard_normal()) * np.ones(20))) for i in range(200)]
    assert drift_of(flat, 0.1)[1] < 4.0


def test_drift_of_does_not_count_the_fast_spells_twice():
    """A window's mean carries its own fast spells (here spells of 0.3 s, as this host's), which
    the simulator draws again on top of the drift. Fitted as the calibration fits them (spread_of
    over the windows each over its mean, then drift_of given those spells), the simulator's
    process gives 2-second windows whose means spread as the measured ones do; the drift taken
    whole from the means (no spells given) spreads them about 1.2x too wide."""
    spells = SpeedProcess(SKEWED, 0.3, seed=5)
    for sd in (0.0, 0.08):
        rng = np.random.default_rng(9)
        windows = _windows(np.exp(sd * rng.standard_normal(150)), spells, 3.0)
        measured = np.log([np.mean(r) for _, r in windows]).std()
        within = spread_of([np.asarray(r) / np.mean(r) for _, r in windows], 0.1)
        spreads = []
        for given in (within, None):
            drift = drift_of(windows, 0.1, given)
            fitted = SpeedProcess(*within, seed=21, drift=drift if drift[0] else None)
            spreads.append(np.log([np.mean(r) for _, r in _windows(np.ones(300), fitted, 3.0)]).std())
        assert spreads[0] == pytest.approx(measured, rel=0.12)
        assert spreads[1] > 1.15 * measured


def log_sd(table) -> float:
    """A quantile table's log standard deviation, from its 10th and 90th percentiles."""
    return math.log(table[18] / table[2]) / (2 * 1.2816)


def test_the_simulator_spreads_latencies_keeping_the_mean(tmp_path):
    """Identical requests one at a time: a constant device gives every request the same TPOT; a
    varying one spreads them (p99 above p50) with about the same total time; the vectorised
    decode runs and the step-by-step path agree under it; the seed fixes the result."""
    wl = {"requests": 60, "arrival": {"process": "closed", "concurrency": 1},
          "prompt_tokens": {"dist": "fixed", "value": 64}, "output_tokens": {"dist": "fixed", "value": 64}}
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    flat = make_trace(tmp_path / "a", workload=wl)
    vary = make_trace(tmp_path / "b", workload=wl, hardware=JITTER)

    def tpots(res):
        return np.array([(s.finish - s.first_token) / (s.output - 1) for s in res.seqs])

    base = simulate(flat, flat.speculation[0], make_requests(flat.workload, flat.seed))
    fast = simulate(vary, vary.speculation[0], make_requests(vary.workload, vary.seed))
    slow = simulate(vary, vary.speculation[0], make_requests(vary.workload, vary.seed), fast=False)
    again = simulate(vary, vary.speculation[0], make_requests(vary.workload, vary.seed))
    other = simulate(vary, vary.speculation[0], make_requests(vary.workload, vary.seed), draw=1)
    t0, t1 = tpots(base), tpots(fast)
    assert np.ptp(t0) < 1e-9 * t0[0]
    assert np.percentile(t1, 99) > 1.3 * np.median(t1)
    assert fast.duration == pytest.approx(base.duration, rel=0.15)
    np.testing.assert_allclose(t1, tpots(slow), rtol=1e-6)
    assert np.array_equal(t1, tpots(again)) and not np.array_equal(t1, tpots(other))
    # with a drift as well: the fast path still equals the step-by-step one, the mean is kept
    (tmp_path / "c").mkdir()
    both = make_trace(tmp_path / "c", workload=wl, hardware={**JITTER, "speed_drift_rates": [0.4, 1.0, 1.1],
                                                             "speed_drift_ms": 300.0})
    d_fast = simulate(both, both.speculation[0], make_requests(both.workload, both.seed))
    d_slow = simulate(both, both.speculation[0], make_requests(both.workload, both.seed), fast=False)
    np.testing.assert_allclose(tpots(d_fast), tpots(d_slow), rtol=1e-6)
    assert d_fast.duration == pytest.approx(base.duration, rel=0.25)
    assert not np.allclose(tpots(d_fast), t1)
