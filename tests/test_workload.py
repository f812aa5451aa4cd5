"""sim.workload: arrival processes, length distributions, closed loop and Azure trace replay."""
from __future__ import annotations

import csv
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sim.errors import SpecError
from sim.spec import ArrivalSpec, LengthDist, WorkloadSpec
from sim.workload import Request, Workload, make_requests, read_azure, sample_lengths

AZURE_DIR = Path(__file__).resolve().parents[2] / "shared" / "data" / "azure-llm-2023"
CONV = AZURE_DIR / "AzureLLMInferenceTrace_conv.csv"
CODE = AZURE_DIR / "AzureLLMInferenceTrace_code.csv"
needs_azure = pytest.mark.skipif(
    not (CONV.is_file() and CODE.is_file()),
    reason=f"Azure LLM trace CSVs not found in {AZURE_DIR} (shared data folder absent)")

FIXED = LengthDist("fixed", value=128)
UNIFORM = LengthDist("uniform", min=10, max=20)


def _spec(arrival: ArrivalSpec, n: int = 1000, prompt: LengthDist | None = FIXED,
          output: LengthDist | None = UNIFORM) -> WorkloadSpec:
    return WorkloadSpec(requests=n, arrival=arrival, prompt_tokens=prompt, output_tokens=output)


def _arrays(w: Workload) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r = w.requests
    return (np.array([x.arrival for x in r]), np.array([x.prompt_tokens for x in r]),
            np.array([x.output_tokens for x in r]))


def _cv(x: np.ndarray) -> float:
    return float(x.std(ddof=1) / x.mean())


# ------------------------------------------------------------------------------------------ determinism

def test_same_seed_identical_different_seed_differs():
    spec = _spec(ArrivalSpec("gamma", rate_per_s=5.0, cv=2.0), n=500,
                 prompt=LengthDist("lognormal", median=300, sigma=1.0, max=4000))
    a, b = make_requests(spec, 7), make_requests(spec, 7)
    assert a == b
    c = make_requests(spec, 8)
    assert a.requests != c.requests
    for x, y in zip(_arrays(a), _arrays(c)):
        assert not np.array_equal(x, y)


def test_streams_are_independent():
    """Changing one distribution or the arrival process leaves the other samples unchanged."""
    base = _spec(ArrivalSpec("poisson", rate_per_s=3.0), n=300, prompt=UNIFORM,
                 output=LengthDist("lognormal", median=50, sigma=0.5))
    t0, p0, o0 = _arrays(make_requests(base, 11))
    t1, p1, o1 = _arrays(make_requests(replace(base, prompt_tokens=LengthDist("uniform", min=1, max=9999)), 11))
    assert np.array_equal(t0, t1) and np.array_equal(o0, o1) and not np.array_equal(p0, p1)
    t2, p2, o2 = _arrays(make_requests(replace(base, arrival=ArrivalSpec("gamma", rate_per_s=3.0, cv=3.0)), 11))
    assert np.array_equal(p0, p2) and np.array_equal(o0, o2) and not np.array_equal(t0, t2)


def test_request_shape():
    w = make_requests(_spec(ArrivalSpec("poisson", rate_per_s=1.0), n=50), 0)
    assert isinstance(w, Workload) and len(w.requests) == 50 and w.closed_concurrency is None
    assert [r.id for r in w.requests] == list(range(50))
    r = w.requests[0]
    assert isinstance(r, Request)
    assert type(r.id) is int and type(r.arrival) is float
    assert type(r.prompt_tokens) is int and type(r.output_tokens) is int
    with pytest.raises(AttributeError):
        r.arrival = 1.0  # frozen


# --------------------------------------------------------------------------------------------- arrivals

N_STAT = 20_000
Z = 5.0  # tolerance in standard errors


def test_poisson_mean_and_cv():
    rate = 4.0
    t, _, _ = _arrays(make_requests(_spec(ArrivalSpec("poisson", rate_per_s=rate), n=N_STAT), 123))
    assert t[0] > 0  # first request arrives after the first gap, not at 0
    assert np.all(np.diff(t) >= 0)
    gaps = np.diff(np.concatenate([[0.0], t]))
    # exponential: sd = mean, so SE(mean) = (1/rate)/sqrt(n); SE(CV) = sqrt((1 + 1)/(2n)) = 1/sqrt(n)
    assert abs(gaps.mean() - 1 / rate) < Z * (1 / rate) / math.sqrt(N_STAT)
    assert abs(_cv(gaps) - 1.0) < Z / math.sqrt(N_STAT)


@pytest.mark.parametrize("cv", [0.5, 2.0])
def test_gamma_mean_and_cv(cv):
    rate = 10.0
    t, _, _ = _arrays(make_requests(_spec(ArrivalSpec("gamma", rate_per_s=rate, cv=cv), n=N_STAT), 5))
    assert np.all(np.diff(t) >= 0)
    gaps = np.diff(np.concatenate([[0.0], t]))
    mean = 1 / rate
    assert abs(gaps.mean() - mean) < Z * cv * mean / math.sqrt(N_STAT)
    # sample CV of a gamma (skewness 2cv, excess kurtosis 6cv^2): SE ~ cv * sqrt((1 + cv^2) / (2n))
    # (the delta method; checked against Monte Carlo at cv = 0.5, 1, 2)
    se_cv = cv * math.sqrt((1 + cv * cv) / (2 * N_STAT))
    assert abs(_cv(gaps) - cv) < Z * se_cv


# ---------------------------------------------------------------------------------------------- closed

def test_closed_loop():
    w = make_requests(_spec(ArrivalSpec("closed", concurrency=16), n=200), 1)
    assert w.closed_concurrency == 16
    t, p, o = _arrays(w)
    assert np.all(t == 0.0) and len(t) == 200
    assert np.all(p == 128) and np.all((o >= 10) & (o <= 20))


def test_concurrency_override_keeps_lengths():
    spec = _spec(ArrivalSpec("poisson", rate_per_s=2.0), n=300, output=LengthDist("lognormal", median=80, sigma=1))
    open_w = make_requests(spec, 3)
    closed_w = make_requests(spec, 3, concurrency=32)
    assert open_w.closed_concurrency is None and closed_w.closed_concurrency == 32
    t, p, o = _arrays(closed_w)
    _, p0, o0 = _arrays(open_w)
    assert np.all(t == 0.0)
    assert np.array_equal(p, p0) and np.array_equal(o, o0)
    # a closed spec swept at another level uses the sweep level
    assert make_requests(_spec(ArrivalSpec("closed", concurrency=4)), 0, concurrency=64).closed_concurrency == 64


# --------------------------------------------------------------------------------------------- lengths

def test_fixed_exact():
    x = sample_lengths(LengthDist("fixed", value=77), 1000, np.random.default_rng(0))
    assert x.dtype == np.int64 and x.shape == (1000,) and np.all(x == 77)


def test_uniform_bounds_and_ends():
    x = sample_lengths(LengthDist("uniform", min=5, max=9), 5000, np.random.default_rng(0))
    assert x.dtype == np.int64
    assert x.min() == 5 and x.max() == 9
    assert set(np.unique(x)) == {5, 6, 7, 8, 9}
    # degenerate range
    assert np.all(sample_lengths(LengthDist("uniform", min=3, max=3), 10, np.random.default_rng(0)) == 3)


def test_lognormal_median_and_clip():
    d = LengthDist("lognormal", median=400.0, sigma=0.8)
    x = sample_lengths(d, N_STAT, np.random.default_rng(1))
    assert x.dtype == np.int64 and x.min() >= 1
    # sample median of N(log m, s) in log space: SE = s * sqrt(pi/2) / sqrt(n)
    se = 0.8 * math.sqrt(math.pi / 2) / math.sqrt(N_STAT)
    assert abs(math.log(np.median(x)) - math.log(400.0)) < Z * se + 1e-3  # + rounding to integers
    clipped = sample_lengths(replace(d, min=300, max=500), N_STAT, np.random.default_rng(1))
    assert clipped.min() == 300 and clipped.max() == 500
    # extreme sigma must not overflow
    huge = sample_lengths(LengthDist("lognormal", median=10, sigma=10, min=1, max=1000), 1000, np.random.default_rng(2))
    assert huge.min() >= 1 and huge.max() <= 1000


def test_empirical_frequencies_match_weights():
    values, weights = (10, 20, 30, 40), (1.0, 2.0, 3.0, 4.0)  # unnormalised on purpose
    x = sample_lengths(LengthDist("empirical", values=values, weights=weights), N_STAT, np.random.default_rng(4))
    assert set(np.unique(x)) <= set(values)
    counts = np.array([(x == v).sum() for v in values])
    expected = N_STAT * np.array(weights) / sum(weights)
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert chi2 < 21.1  # chi-square, 3 d.o.f., p = 1e-4


def test_empirical_unweighted_and_zero_weight():
    x = sample_lengths(LengthDist("empirical", values=(3, 7)), 10_000, np.random.default_rng(5))
    frac = (x == 3).mean()
    assert abs(frac - 0.5) < Z * 0.5 / math.sqrt(10_000)
    y = sample_lengths(LengthDist("empirical", values=(3, 7, 9), weights=(1, 0, 1)), 5000, np.random.default_rng(5))
    assert 7 not in set(y.tolist())


def test_empty_sample():
    assert sample_lengths(UNIFORM, 0, np.random.default_rng(0)).shape == (0,)


def _empirical(values: list[int], weights: list[float]) -> LengthDist:
    """Weighted when enough weights with a positive sum were drawn, else unweighted."""
    w = weights[:len(values)]
    weighted = len(w) == len(values) and sum(w) > 0
    return LengthDist("empirical", values=tuple(values), weights=tuple(w) if weighted else ())


lengths = st.one_of(
    st.builds(lambda v: LengthDist("fixed", value=v), st.integers(1, 10**7)),
    st.builds(lambda a, b: LengthDist("uniform", min=min(a, b), max=max(a, b)),
              st.integers(1, 10**7), st.integers(1, 10**7)),
    st.builds(lambda a, b, m, s: LengthDist("lognormal", min=min(a, b), max=max(a, b), median=m, sigma=s),
              st.integers(1, 10**7), st.integers(1, 10**7), st.floats(1, 1e7), st.floats(0, 10)),
    st.builds(_empirical, st.lists(st.integers(1, 10**7), min_size=1, max_size=20),
              st.lists(st.floats(0, 100), max_size=20)),
)


@given(dist=lengths, seed=st.integers(0, 2**32), n=st.integers(0, 300))
def test_lengths_within_bounds(dist, seed, n):
    x = sample_lengths(dist, n, np.random.default_rng(seed))
    assert x.dtype == np.int64 and x.shape == (n,)
    if n == 0:
        return
    assert x.min() >= 1
    if dist.dist == "fixed":
        assert np.all(x == dist.value)
    elif dist.dist in ("uniform", "lognormal"):
        assert x.min() >= dist.min and x.max() <= dist.max
    else:
        allowed = set(dist.values) if not dist.weights else {v for v, w in zip(dist.values, dist.weights) if w > 0}
        assert set(x.tolist()) <= allowed
    assert x.max() <= dist.upper


# ----------------------------------------------------------------------------------------------- speed

def test_100k_requests_are_made():
    """100k requests from a heavy-tailed spec come out whole; their speed is a benchmark's
    (bench/bench_workload.py), not a test's."""
    spec = _spec(ArrivalSpec("gamma", rate_per_s=50.0, cv=2.0), n=100_000,
                 prompt=LengthDist("lognormal", median=1000, sigma=1.0, max=32000),
                 output=LengthDist("empirical", values=(10, 100, 1000), weights=(1, 2, 1)))
    w = make_requests(spec, 0)
    assert len(w.requests) == 100_000


# ---------------------------------------------------------------------------------------------- replay

def _csv_rows(path: Path) -> list[list[str]]:
    with open(path, newline="") as fh:
        return [r for r in csv.reader(fh)][1:]


def _replay(path: Path, n: int, **kw) -> WorkloadSpec:
    return WorkloadSpec(requests=n, arrival=ArrivalSpec("replay", file=path, **kw),
                        prompt_tokens=None, output_tokens=None)


@needs_azure
def test_replay_conv_first_rows_and_all():
    arrival, prompt, output = read_azure(CONV, 0, 10**9)
    rows = _csv_rows(CONV)
    assert len(arrival) == len(rows) > 19_000
    assert arrival[0] == 0.0 and arrival[1] == pytest.approx(4.314579, abs=1e-9)
    assert prompt[:2].tolist() == [374, 396] and output[:2].tolist() == [44, 109]
    assert prompt.tolist() == [max(int(r[1]), 1) for r in rows]
    assert output.tolist() == [max(int(r[2]), 1) for r in rows]
    assert np.all(np.diff(arrival) >= 0)
    assert 3000 < arrival[-1] < 3700  # about an hour


@needs_azure
def test_replay_make_requests_count_scale_skip():
    w = make_requests(_replay(CONV, 100), 0)
    assert len(w.requests) == 100 and w.closed_concurrency is None
    r0, r1 = w.requests[:2]
    assert (r0.arrival, r0.prompt_tokens, r0.output_tokens) == (0.0, 374, 44)
    assert r1.arrival == pytest.approx(4.314579, abs=1e-9) and (r1.prompt_tokens, r1.output_tokens) == (396, 109)
    t, _, _ = _arrays(w)
    assert np.all(np.diff(t) >= 0)
    half, _, _ = _arrays(make_requests(_replay(CONV, 100, time_scale=0.5), 0))
    assert np.allclose(half, t * 0.5)
    # skip: rows 1.. — arrivals measured from the first selected row
    ts, ps, os_ = _arrays(make_requests(_replay(CONV, 99, skip=1), 0))
    assert ts[0] == 0.0 and np.allclose(ts, t[1:] - t[1])
    assert ps[0] == 396 and os_[0] == 109
    # deterministic and seed-independent when the file supplies everything
    assert make_requests(_replay(CONV, 100), 0) == make_requests(_replay(CONV, 100), 99)


@needs_azure
def test_replay_short_file_and_overrides():
    rows = _csv_rows(CODE)
    w = make_requests(_replay(CODE, 10**6, skip=len(rows) - 5), 0)
    assert len(w.requests) == 5  # fewer rows than asked for: use what there is
    assert [r.prompt_tokens for r in w.requests] == [max(int(r[1]), 1) for r in rows[-5:]]
    with pytest.raises(SpecError):
        make_requests(_replay(CODE, 10, skip=len(rows)), 0)
    # length overrides: arrivals still from the file
    base = make_requests(_replay(CODE, 200), 0)
    spec = replace(_replay(CODE, 200), prompt_tokens=FIXED, output_tokens=UNIFORM)
    over = make_requests(spec, 0)
    assert [r.arrival for r in over.requests] == [r.arrival for r in base.requests]
    assert all(r.prompt_tokens == 128 and 10 <= r.output_tokens <= 20 for r in over.requests)
    # sweep override on a replay: closed loop, lengths still from the file
    sw = make_requests(_replay(CODE, 200), 0, concurrency=8)
    assert sw.closed_concurrency == 8 and all(r.arrival == 0.0 for r in sw.requests)
    assert [r.prompt_tokens for r in sw.requests] == [r.prompt_tokens for r in base.requests]


@needs_azure
def test_replay_code_file_first_rows():
    arrival, prompt, output = read_azure(CODE, 0, 3)
    rows = _csv_rows(CODE)[:3]
    assert prompt.tolist() == [int(r[1]) for r in rows] and prompt[0] == 4808 and output[0] == 10
    assert arrival[1] == pytest.approx(0.052, abs=1e-9)  # 18:17:04.0319600 - 18:17:03.9799600
    assert len(read_azure(CODE, 0, 10**9)[0]) == len(_csv_rows(CODE))


HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens\n"


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "trace.csv"
    p.write_text(text)
    return p


def test_replay_synthetic_file(tmp_path):
    p = _write(tmp_path, HEADER + "2023-11-16 23:59:59.5000000,0,5\n\n2023-11-17 00:00:00.2500000,10,-3\n"
                                  "2023-11-17 00:00:01,7,7\n")
    t, pr, out = read_azure(p, 0, 10)
    assert np.allclose(t, [0.0, 0.75, 1.5])  # across midnight; 7 digits or none
    assert pr.tolist() == [1, 10, 7] and out.tolist() == [5, 1, 7]  # counts < 1 raised to 1
    assert read_azure(p, 1, 1)[1].tolist() == [10]
    assert len(read_azure(p, 3, 10)[0]) == 0


@pytest.mark.parametrize("text, where", [
    ("", "empty"),
    ("time,a,b\n2023-11-16 18:15:46.6805900,1,1\n", "line 1"),
    (HEADER + "2023-11-16 18:15:46.6805900,374,44\n2023-11-16 18:15:50.99,396\n", "line 3"),
    (HEADER + "2023-11-16 18:15:46.6805900,374,44\nyesterday,396,109\n", "line 3"),
    (HEADER + "2023-11-16 18:15:46.6805900,374,44\n2023-11-16 18:15:50.99,3.5,109\n", "line 3"),
    (HEADER + "2023-13-16 18:15:46.6805900,374,44\n", "line 2"),
    (HEADER + "2023-11-16 25:15:46.6805900,374,44\n", "line 2"),
])
def test_malformed_csv_raises_spec_error(tmp_path, text, where):
    p = _write(tmp_path, text)
    with pytest.raises(SpecError) as e:
        make_requests(_replay(p, 10), 0)
    assert e.value.file == str(p) and e.value.path == "workload.arrival.file"
    assert where in e.value.message
    assert str(p) in str(e.value)


def test_missing_file_raises_spec_error(tmp_path):
    with pytest.raises(SpecError) as e:
        read_azure(tmp_path / "nope.csv", 0, 10)
    assert "nope.csv" in str(e.value)
