"""Request streams: arrival times and token lengths drawn from a `WorkloadSpec`, or replayed from a trace.

Pure numpy + stdlib. Everything is vectorised; the only per-request Python work is building the
`Request` objects at the end (and, for a replay, parsing the CSV rows).

Conventions
-----------
* Determinism: one ``np.random.SeedSequence(seed)`` is spawned into three independent child streams,
  used for arrivals, prompt lengths and output lengths respectively. Changing one distribution (or the
  arrival process) leaves the samples of the other two unchanged.
* Poisson / gamma: request ``i`` arrives at the sum of the first ``i + 1`` inter-arrival gaps, i.e. the
  first request arrives after one gap, not at 0.0 (a renewal process started at time 0).
* Closed loop (``process: closed``, or any spec run with a ``concurrency`` override): every request has
  arrival 0.0 and ``Workload.closed_concurrency`` says how many the executor keeps in flight.
* Replay (``format: azure``): rows ``skip .. skip + requests - 1`` of the CSV (data rows, header excluded,
  blank lines ignored). If the file has fewer rows the workload is shorter: it holds what there is (at
  least one row; none at all is a `SpecError`). Arrival = (timestamp - earliest selected timestamp) x
  ``time_scale``; rows out of time order are stably sorted by timestamp (ids follow the sorted order).
  Token counts below 1 are raised to 1. Given ``prompt_tokens`` / ``output_tokens`` distributions replace
  the file's lengths; arrival times still come from the file.
"""
from __future__ import annotations

import csv
import datetime as _dt
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from sim.errors import SpecError

if TYPE_CHECKING:  # only for annotations: keeps this module importable on its own
    from sim.spec import LengthDist, WorkloadSpec

__all__ = ["Request", "Workload", "make_requests", "sample_lengths", "read_azure", "AZURE_COLUMNS"]

AZURE_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
_FILE_KEY = "workload.arrival.file"


@dataclass(frozen=True, slots=True)
class Request:
    id: int  # 0..n-1 in arrival order
    arrival: float  # seconds from the start; 0.0 for every closed-loop request
    prompt_tokens: int  # >= 1
    output_tokens: int  # >= 1


@dataclass(frozen=True)
class Workload:
    requests: list[Request]
    closed_concurrency: int | None  # closed loop: keep this many in flight; None for open-loop arrivals

    def __len__(self) -> int:
        return len(self.requests)


# ---------------------------------------------------------------------------------------------- lengths

def sample_lengths(dist: LengthDist, n: int, rng: np.random.Generator) -> np.ndarray:
    """`n` token counts (int64, each >= 1) drawn from `dist`.

    fixed: all ``value``; uniform: integers in ``[min, max]`` inclusive; lognormal:
    ``round(exp(N(log(median), sigma)))`` clipped to ``[min, max]``; empirical: draws from ``values``
    with probabilities ``weights / sum(weights)`` (uniform over ``values`` when no weights are given).
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    kind = dist.dist
    if kind == "fixed":
        return np.full(n, max(int(dist.value), 1), dtype=np.int64)
    if kind == "uniform":
        lo, hi = max(int(dist.min), 1), int(dist.max)
        if hi < lo:
            raise ValueError(f"uniform length: max {hi} < min {lo}")
        return rng.integers(lo, hi, size=n, endpoint=True, dtype=np.int64)
    if kind == "lognormal":
        lo, hi = max(int(dist.min), 1), int(dist.max)
        if hi < lo:
            raise ValueError(f"lognormal length: max {hi} < min {lo}")
        if not dist.median > 0 or not dist.sigma >= 0:
            raise ValueError(f"lognormal length: need median > 0 and sigma >= 0, got {dist.median}, {dist.sigma}")
        z = rng.normal(math.log(dist.median), dist.sigma, size=n)
        with np.errstate(over="ignore"):
            x = np.exp(z)  # may overflow to inf for huge sigma; the clip below handles it
        return np.clip(np.rint(x), lo, hi).astype(np.int64)
    if kind == "empirical":
        values = np.asarray(dist.values, dtype=np.int64)
        if values.size == 0:
            raise ValueError("empirical length: no values")
        values = np.maximum(values, 1)
        if not dist.weights:
            return values[rng.integers(0, values.size, size=n)]
        w = np.asarray(dist.weights, dtype=np.float64)
        if w.shape != values.shape or not np.all(w >= 0) or not w.sum() > 0:
            raise ValueError("empirical length: need one non-negative weight per value, with a positive sum")
        cdf = np.cumsum(w / w.sum())
        cdf[-1] = 1.0
        idx = np.searchsorted(cdf, rng.random(n), side="right")
        return values[np.minimum(idx, values.size - 1)]
    raise ValueError(f"unknown length distribution {kind!r} (expected fixed | uniform | lognormal | empirical)")


# --------------------------------------------------------------------------------------------- arrivals

def _poisson_arrivals(rate: float, n: int, rng: np.random.Generator) -> np.ndarray:
    if not rate > 0:
        raise ValueError(f"poisson arrivals need rate_per_s > 0, got {rate}")
    return np.cumsum(rng.exponential(1.0 / rate, size=n))


def _gamma_arrivals(rate: float, cv: float, n: int, rng: np.random.Generator) -> np.ndarray:
    if not rate > 0 or not cv > 0:
        raise ValueError(f"gamma arrivals need rate_per_s > 0 and cv > 0, got {rate}, {cv}")
    k = 1.0 / (cv * cv)
    return np.cumsum(rng.gamma(k, 1.0 / (rate * k), size=n))


# ------------------------------------------------------------------------------------------------ replay

_TS = re.compile(r"\s*(\d{4}-\d{2}-\d{2})[ T](\d{1,2}):(\d{2}):(\d{2}(?:\.\d*)?)\s*")


def read_azure(path: Path, skip: int, limit: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Read data rows ``skip .. skip + limit - 1`` of an Azure LLM inference trace CSV.

    Returns ``(arrival, prompt, output)``: arrival in float64 seconds from the earliest selected row
    (rows are stably sorted by time if the file is out of order), token counts as int64 raised to >= 1.
    Fewer rows than asked for are returned when the file runs out. Rows after the selection are not read.
    Raises `SpecError(str(path), "workload.arrival.file", ...)` naming the line for a malformed file.
    """
    path = Path(path)
    if skip < 0 or limit < 0:
        raise ValueError(f"skip and limit must be >= 0, got {skip}, {limit}")

    def bad(message: str) -> SpecError:
        return SpecError(str(path), _FILE_KEY, message)

    days: list[int] = []
    secs: list[float] = []
    prompt: list[int] = []
    output: list[int] = []
    day_cache: dict[str, int] = {}
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            reader = csv.reader(fh)
            header = next(reader, None)
            while header is not None and not header:
                header = next(reader, None)
            if header is None:
                raise bad(f"empty file; expected a header line {','.join(AZURE_COLUMNS)}")
            names = [h.strip() for h in header]
            missing = [c for c in AZURE_COLUMNS if c not in names]
            if missing:
                raise bad(f"line {reader.line_num}: header {','.join(names)!r} lacks column(s) "
                          f"{', '.join(missing)} (expected {','.join(AZURE_COLUMNS)})")
            i_ts, i_p, i_o = (names.index(c) for c in AZURE_COLUMNS)
            width = max(i_ts, i_p, i_o) + 1
            seen = 0
            end = skip + limit
            if limit == 0:
                return (np.zeros(0), np.zeros(0, np.int64), np.zeros(0, np.int64))
            for row in reader:
                if not row or (len(row) == 1 and not row[0].strip()):
                    continue  # blank line
                seen += 1
                if seen <= skip:
                    continue
                line = reader.line_num
                if len(row) < width:
                    raise bad(f"line {line}: expected {len(names)} comma-separated fields, got {len(row)}: "
                              f"{','.join(row)!r}")
                m = _TS.fullmatch(row[i_ts])
                if m is None:
                    raise bad(f"line {line}: TIMESTAMP {row[i_ts]!r} is not like 2023-11-16 18:17:03.9799600")
                date_s, h_s, m_s, s_s = m.groups()
                day = day_cache.get(date_s)
                if day is None:
                    try:
                        day = _dt.date.fromisoformat(date_s).toordinal()
                    except ValueError:
                        raise bad(f"line {line}: TIMESTAMP {row[i_ts]!r} has an invalid date") from None
                    day_cache[date_s] = day
                h, mi, s = int(h_s), int(m_s), float(s_s)
                if h > 23 or mi > 59 or s >= 61.0:
                    raise bad(f"line {line}: TIMESTAMP {row[i_ts]!r} has an invalid time of day")
                try:
                    p, o = int(row[i_p]), int(row[i_o])
                except ValueError:
                    raise bad(f"line {line}: ContextTokens and GeneratedTokens must be integers, got "
                              f"{row[i_p]!r}, {row[i_o]!r}") from None
                days.append(day)
                secs.append(h * 3600.0 + mi * 60.0 + s)
                prompt.append(p)
                output.append(o)
                if seen >= end:
                    break
    except SpecError:
        raise
    except csv.Error as e:
        raise bad(f"not a readable CSV file: {e}") from None
    except UnicodeDecodeError as e:
        raise bad(f"not a UTF-8 text file: {e}") from None
    except OSError as e:
        raise bad(f"cannot read the file: {e.strerror or e}") from None

    if not days:
        return (np.zeros(0), np.zeros(0, np.int64), np.zeros(0, np.int64))
    d = np.asarray(days, dtype=np.int64)
    # day offsets kept separate so seconds stay small and keep their 100 ns digits exactly enough
    t = (d - d.min()).astype(np.float64) * 86400.0 + np.asarray(secs, dtype=np.float64)
    p_arr = np.maximum(np.asarray(prompt, dtype=np.int64), 1)
    o_arr = np.maximum(np.asarray(output, dtype=np.int64), 1)
    if np.any(np.diff(t) < 0):
        order = np.argsort(t, kind="stable")
        t, p_arr, o_arr = t[order], p_arr[order], o_arr[order]
    return t - t[0], p_arr, o_arr


# ----------------------------------------------------------------------------------------------- driver

def make_requests(spec: WorkloadSpec, seed: int, concurrency: int | None = None) -> Workload:
    """The requests `spec` describes, drawn deterministically from `seed`.

    With `concurrency` given the workload runs closed-loop at that level (a sweep point) whatever
    ``spec.arrival`` says: every arrival is 0.0 and lengths still come from the spec (or, for a
    replay, from the file unless the spec overrides them).
    """
    if concurrency is not None and concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    arr_ss, prompt_ss, out_ss = np.random.SeedSequence(seed).spawn(3)
    arr_rng, prompt_rng, out_rng = (np.random.default_rng(s) for s in (arr_ss, prompt_ss, out_ss))
    a = spec.arrival
    n = int(spec.requests)
    closed: int | None = None

    if a.process == "replay":
        if a.format != "azure":
            raise SpecError(None, "workload.arrival.format", f"unsupported replay format {a.format!r} (expected azure)")
        if a.file is None:
            raise SpecError(None, _FILE_KEY, "a replay needs a file")
        arrival, prompt, output = read_azure(Path(a.file), a.skip, n)
        n = arrival.size
        if n == 0:
            raise SpecError(str(a.file), "workload.arrival.skip",
                            f"skip {a.skip} leaves no rows to replay (the file has no more data rows)")
        arrival = arrival * float(a.time_scale)
        if spec.prompt_tokens is not None:
            prompt = sample_lengths(spec.prompt_tokens, n, prompt_rng)
        if spec.output_tokens is not None:
            output = sample_lengths(spec.output_tokens, n, out_rng)
    else:
        if spec.prompt_tokens is None or spec.output_tokens is None:
            raise SpecError(None, "workload", "prompt_tokens and output_tokens are required unless replaying a file")
        if a.process == "poisson":
            arrival = _poisson_arrivals(a.rate_per_s, n, arr_rng)
        elif a.process == "gamma":
            arrival = _gamma_arrivals(a.rate_per_s, a.cv, n, arr_rng)
        elif a.process == "closed":
            if a.concurrency < 1:
                raise SpecError(None, "workload.arrival.concurrency", f"expected >= 1, got {a.concurrency}")
            arrival = np.zeros(n)
            closed = int(a.concurrency)
        else:
            raise SpecError(None, "workload.arrival.process",
                            f"unknown arrival process {a.process!r} (expected poisson | gamma | closed | replay)")
        prompt = sample_lengths(spec.prompt_tokens, n, prompt_rng)
        output = sample_lengths(spec.output_tokens, n, out_rng)

    if concurrency is not None:
        arrival = np.zeros(n)
        closed = int(concurrency)

    reqs = list(map(Request, range(n), arrival.tolist(), prompt.tolist(), output.tolist()))
    return Workload(requests=reqs, closed_concurrency=closed)
