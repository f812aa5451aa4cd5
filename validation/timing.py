"""Timing primitives for the calibration's probes (validation/probes.py, validation/host_probes.py)
and the host's speed reference that validation.compare times beside the engine's steps."""
from __future__ import annotations

import time

import torch


def device_sync(device: str):
    def sync():
        if device == "cuda":
            torch.cuda.synchronize()
    return sync


HOST_REFERENCE_ITERS = 10_000  # increments of the reference loop: about 0.2 ms here
REFERENCE_RUN = 200  # increments of one inner run: every int the loop holds stays below 257


def host_reference(iters: int = HOST_REFERENCE_ITERS) -> int:
    """The host's speed reference, timed beside what it measures (validation.compare: after every
    engine step): interpreter work only, so it runs as fast after a call that swept the caches as
    after one that did not (right after a batch-16 forward over 2,048 keys a model's forward, or a
    small matmul loop, read 1.22-1.25x slower than usual; the loop before 0.38.0 0.97x). It counts
    in runs of REFERENCE_RUN over ints CPython keeps one object of each (-5 to 256; runs too, up to
    51,200 increments), so it makes no object. Until 0.37.0 it summed range(5000), one new int a
    step, and that loop read the host 5.6% faster right after four of the calibration's probe
    calls than right after an engine run, 7.5% after half a second's sleep, where this loop, the
    probes' host-time forward and small torch calls read the same within 1.2% in all three
    (cpu-epyc-zen3/0.38.0/contexts.txt, medians of 18 runs). Returns the runs made."""
    runs, done = iters // REFERENCE_RUN or 1, 0  # (max() would make a tuple)
    while done < runs:
        x = 0
        while x < REFERENCE_RUN:
            x += 1
        done += 1
    return done


def settled_reference() -> float:
    """Seconds of one reference loop run right after another: the host's speed reading that
    validation.compare takes after every engine step. The first call after a step pays for the
    step's use of the caches (3.2-4.1% slower than the calls after it, the median over each run's
    steps of `none` and EAGLE at concurrency 4 on the fourth VM; the second to eighth calls
    agreed within 1.5%), so it runs untimed."""
    host_reference()
    t0 = time.perf_counter()
    host_reference()
    return time.perf_counter() - t0


def mean_time(fn, device: str, calls: int, warm: bool = True, min_s: float = 0.0) -> float:
    """Mean seconds of `calls` calls of fn (more, until they add up to `min_s` seconds), after one
    warm-up call unless `warm` is False (synchronised on a GPU)."""
    sync = device_sync(device)
    if warm:
        fn()
    sync()
    t0 = time.perf_counter()
    n = max(1, calls)
    for _ in range(n):
        fn()
    while min_s > 0.0:
        sync()
        if time.perf_counter() - t0 >= min_s:
            break
        fn()
        n += 1
    sync()
    return (time.perf_counter() - t0) / n


def host_gap(seconds: float):
    """A call that keeps the host busy with interpreter work (host_reference) for `seconds`,
    touching next to no memory: the time a model's weights wait between two of its steps."""
    def gap():
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            host_reference(200)
    return gap


def steady_time(fn, device: str, tol: float = 0.03, least: int = 6, most: int = 12, between=None) -> float:
    """Seconds of one call of fn once repeating it stops making it faster: at least `least`
    calls, then until one is no more than `tol` faster than the one before (`most` at most), the
    mean of the last two. A pool of weights that fits the last-level cache takes five to eight
    passes to settle there after other work swept it, and its first passes can read alike before
    the times fall: after a write over 1.5x that cache, 64 MiB of 768 KiB matrices read 67, 66,
    55, 42, 35, 34 us a matrix per pass (1 row), and 16 MiB ones 1.2, 1.2, 0.98, 0.75, 0.69,
    0.66 ms; at 4 rows, where the products' compute dominates, the first pass already reads
    within 2% of the third. `between`: a call before each pass, untimed (host_gap: the steady
    state of weights that wait a step between their uses)."""
    sync = device_sync(device)
    times: list[float] = []
    while len(times) < max(2, least, most):
        if between is not None:
            between()
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
        if len(times) >= max(2, least) and times[-1] >= (1.0 - tol) * times[-2]:
            break
    return (times[-1] + times[-2]) / 2


def block_times(fns: dict, calls: int) -> dict:
    """{name: mean seconds} of `calls` calls of each of `fns`, calls that time their own part and
    return its seconds (validation.probes.elementwise_probe), each fn's calls one after another
    after one untimed call: a forward runs its layers at one size back to back, and the first
    call after a larger size's reads slower (the elementwise passes' 64-token call right after
    the 4,096-token one read 0.95 ms, against 0.52 ms after the 1,024-token one and 0.34 ms after
    its own size: interleaved one by one, that flattened their first stretch to 0.3 ns an
    element)."""
    n = max(1, calls)
    out = {}
    for name, fn in fns.items():
        fn()
        out[name] = sum(fn() for _ in range(n)) / n
    return out


def interleaved_times(fns: dict, device: str, calls: int, between=None) -> dict:
    """{name: mean seconds per call} of `calls` calls of each of `fns`, the calls interleaved one
    by one (fn a, fn b, fn a, ...): a calibration figure that is a difference of two probes (per
    layer: 6 layers against 1) would otherwise take them seconds apart, and this host's speed
    changes within seconds (per-layer figures read 60 to 110 us between calibrations). One
    untimed round first: the first call after a probe that swept the caches reads slower.
    `between`: a call before each timed one, untimed (validation.traffic.Traffic.read: the memory
    traffic of a pass before the host work that follows it in the engine), or {name: call}."""
    sync = device_sync(device)
    for fn in fns.values():
        fn()
    total = dict.fromkeys(fns, 0.0)
    for _ in range(max(1, calls)):
        for name, fn in fns.items():
            before = between.get(name) if isinstance(between, dict) else between
            if before is not None:
                before()
            sync()
            t0 = time.perf_counter()
            fn()
            sync()
            total[name] += time.perf_counter() - t0
    return {name: t / max(1, calls) for name, t in total.items()}

