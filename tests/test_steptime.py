"""validation.steptime: a point's samples and their standard error; each pass's calls run for a
minimum time (validation.probes.mean_time)."""
import time

import pytest

from validation.timing import mean_time
from validation.steptime import measured


def test_a_point_is_the_mean_of_its_passes_with_its_standard_error():
    got = measured([0.02, 0.03])
    assert got["measured"] == pytest.approx(0.025)
    assert got["noise"] == pytest.approx(0.2)  # sd 0.00707 / mean 0.025 / sqrt(2)
    assert measured([0.02])["noise"] == 0.0


def test_calls_run_until_both_bounds_are_met():
    calls = []

    def call():
        calls.append(1)
        time.sleep(0.002)
    mean = mean_time(call, "cpu", 3, min_s=0.02)
    assert len(calls) - 1 >= 8 and mean == pytest.approx(0.002, rel=0.9)  # after one warm-up call
    calls.clear()
    mean_time(call, "cpu", 3, min_s=0.0)
    assert len(calls) - 1 == 3
