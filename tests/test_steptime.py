"""validation.steptime: a point's samples and their standard error; each pass's calls run for a
minimum time (validation.probes.mean_time)."""
import pytest

from validation.timing import mean_time
from validation.steptime import measured


def test_a_point_is_the_mean_of_its_passes_with_its_standard_error():
    got = measured([0.02, 0.03])
    assert got["measured"] == pytest.approx(0.025)
    assert got["noise"] == pytest.approx(0.2)  # sd 0.00707 / mean 0.025 / sqrt(2)
    assert measured([0.02])["noise"] == 0.0


def test_calls_run_until_both_bounds_are_met(monkeypatch):
    """Calls run until there are `calls` of them and they add up to `min_s` seconds, after one
    warm-up call. Each call moves a fake clock 2 ms, so the count does not depend on how long this
    host takes to sleep (a loaded CI box once overslept 2 ms sleeps and stopped at 7 calls)."""
    import types

    import validation.timing as timing

    clock = [0.0]
    monkeypatch.setattr(timing, "time", types.SimpleNamespace(perf_counter=lambda: clock[0]))
    calls = []

    def call():
        calls.append(1)
        clock[0] += 0.002
    mean = mean_time(call, "cpu", 3, min_s=0.02)
    assert len(calls) - 1 == 10 and mean == pytest.approx(0.002)  # 10 calls make 20 ms
    calls.clear()
    assert mean_time(call, "cpu", 3, min_s=0.0) == pytest.approx(0.002)
    assert len(calls) - 1 == 3
    calls.clear()
    mean_time(call, "cpu", 3, min_s=0.001)  # the count bound is the larger
    assert len(calls) - 1 == 3
