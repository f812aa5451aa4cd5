"""validation.fit_profiles.solve: the root finder behind the acceptance fits (EAGLE-2's confidence,
its sharpness, the published-figure fits)."""
from __future__ import annotations

import math

import pytest

from validation.fit_profiles import TAU_TOL, confidence_tau, fit_confidence, solve


class Counted:
    """f, counting its calls."""

    def __init__(self, f):
        self.f, self.calls = f, 0

    def __call__(self, x):
        self.calls += 1
        return self.f(x)


@pytest.mark.parametrize("f, lo, hi, target", [
    (lambda x: x ** 3, 0.0, 2.0, 1.5),
    (math.exp, -3.0, 3.0, 7.0),
    (lambda x: math.log1p(x), 0.0, 10.0, 0.3),
    (lambda x: 1 - math.exp(-8 * x), 0.0, 1.0, 0.999),  # flat near the root: the Illinois halving
])
def test_solve_finds_the_root_to_xtol(f, lo, hi, target):
    g = Counted(f)
    x = solve(g, lo, hi, target, xtol=1e-9)
    root = {1.5: 1.5 ** (1 / 3), 7.0: math.log(7.0), 0.3: math.expm1(0.3), 0.999: -math.log(0.001) / 8}[target]
    assert abs(x - root) < 1e-8
    assert g.calls < 40  # bisection from these brackets to 1e-9 takes 31-34 calls


def test_solve_stops_within_ftol():
    g = Counted(lambda x: x ** 3)
    x = solve(g, 0.0, 2.0, 1.5, ftol=0.01)
    assert abs(x ** 3 - 1.5) <= 0.01
    assert g.calls <= 8


@pytest.mark.parametrize("target, end", [(-1.0, 0.0), (9.0, 2.0)])
def test_solve_gives_the_nearer_end_beyond_the_range(target, end):
    assert solve(lambda x: x ** 3, 0.0, 2.0, target) == end


def test_solve_brackets_a_step_function():
    """A target inside a jump: the answer is the jump's place, to xtol."""
    x = solve(lambda x: math.floor(4 * x) / 4, 0.0, 1.0, 0.6, xtol=1e-6)
    assert abs(x - 0.75) < 1e-6


def test_fit_confidence_reproduces_tau_within_its_tolerance():
    """EAGLE-2's confidence fit (depth 6, top-k 8, 60 tokens): the fitted top-1 mean gives the
    asked tau within TAU_TOL, in far fewer than bisection's 20 calls of the tree library."""
    tau = 4.0
    m = fit_confidence(tau, 6, 8, 60, vocab=512)
    assert 0.01 < m < 0.99
    assert abs(confidence_tau(m, 6, 8, 60, vocab=512) - tau) <= TAU_TOL


def test_solve_takes_the_ends_values_the_caller_has():
    """f_lo / f_hi given: the same answer, two calls fewer."""
    plain, given = Counted(lambda x: x ** 3), Counted(lambda x: x ** 3)
    a = solve(plain, 0.0, 2.0, 1.5, xtol=1e-9)
    b = solve(given, 0.0, 2.0, 1.5, xtol=1e-9, f_lo=0.0, f_hi=8.0)
    assert a == b and given.calls == plain.calls - 2


def test_fit_confidence_reuses_the_callers_least_tau():
    """confidence_fit measures tau at LEAST_TOP1 to choose its branch and hands it on: the fit is
    the same as one that computes it again (a small tree library, to keep the test quick)."""
    from validation.fit_profiles import LEAST_TOP1
    least = confidence_tau(LEAST_TOP1, 6, 8, 60, vocab=512, size=64)
    assert fit_confidence(4.0, 6, 8, 60, vocab=512, size=64) == \
        fit_confidence(4.0, 6, 8, 60, at_least=least, vocab=512, size=64)
