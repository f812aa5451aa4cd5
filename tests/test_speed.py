"""The device's speed over time (sim/speed.py): a seeded process of slow and fast spells whose
mean rate is 1, the simulator's use of it, and the estimator the calibration measures it with."""
import numpy as np
import pytest

from sim.simulator import simulate
from sim.speed import QUANTILES, SpeedProcess, mean_of, speed_process, spread_of
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
    p = SpeedProcess(SKEWED, 0.1, seed=3)
    while len(p.rates) < 50_000:
        p._draw()
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


@pytest.mark.parametrize("spell", [1.0, 0.3])
def test_spread_of_recovers_the_process(spell):
    """Windows of 20 blocks of 0.1 s, as the calibration's speed probe times them."""
    p = SpeedProcess(SKEWED, spell, seed=11)
    windows, t = [], 0.0
    for _ in range(60):
        rates = []
        for _ in range(20):  # a block's rate: the work done in it over its length, from its calls
            end, n, tt = t + 0.1, 0, t
            while (w := p.stretch(tt, 0.001)) + tt <= end:
                tt, n = tt + w, n + 1
            rates.append(n / (tt - t))
            t = end
        windows.append(rates)
        t += 5.0
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
