"""Measure this device's ceilings and overheads and write a hardware profile the simulator reads
(DESIGN.md §8.1; validation/profile.py writes it): `python -m validation.calibrate [--out
traces/hardware/cpu-measured.yaml] [--context MODEL|none]`.

Every probe runs round-robin with all the others, `--repeats` rounds, and a figure is the mean of
its calls over all rounds: what the engine's throughput sees is its mean step, slow spells and
interruptions included (a fastest call, or a median, reads this host 10-30% faster than the
engine's steps run). This host's speed swings by up to 1.8x in spells of about ten seconds (a
tiny model's decode forward read 3.4-6.6 ms in 2-second windows, a Python loop beside it moved
with it), so a profile is only good for the moments it was measured in: `python -m validation
steptime` and `python -m validation compare --calibrate` run the probes a few at a time
(`Calibration.tick`, `spread`) between what they measure, and predict from that profile. The
probes whose differences make a figure (1 against 6 layers, 1 against 16 sequences, 8 against 64
queries, two vocabularies) run as one probe, their calls interleaved one by one
(`validation.timing.interleaved_times`; the engine-step runs back to back), so that a difference
never spans a change of the host's speed: taken seconds apart, the per-layer host time read 60 to
110 us per launch between calibrations.

Every probe and the profile fields it gives: validation/CALIBRATION.md.
"""
from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # see engine/__main__.py

import argparse  # noqa: E402
import itertools  # noqa: E402
import math  # noqa: E402
import statistics  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

from engine.host_memory import retain_freed_memory  # noqa: E402
from sim.speed import drift_of, spread_of  # noqa: E402
from validation.drafter_host import (drafter_host_figures, first_pass_probe, later_pass_probe,  # noqa: E402
                                     medusa_host_figures, medusa_probe)
from validation.reuse import (REUSE_CALLS, REUSE_PROMPT, REUSE_ROWS, REUSE_STEPS, insitu_figures, insitu_probe,  # noqa: E402
                              attention_price, layer_in_place, layer_price, probe_prompt, spec_rest_figures,
                              verify_seq_table)
from validation.host_probes import (allocator_op, checkpoint_of, TINY_CHECKPOINT, draft_cand_time, draft_logit_probe, draft_logit_time,
                                    draft_tree_probe,
                                    DRAFT_TREE_TOPK, engine_step, forward_probe, layer_probes, layer_products_time,
                                    layer_time, logit_probe, logit_time, LOGIT_VOCABS, ngram_probe, ngram_times, pass_fixed_time, SPEED_BLOCK_S, speed_probe,
                                    SPEED_WINDOW_S, verify_host_figures, verify_host_probe, VERIFY_SEQS)  # noqa: E402
from validation.probes import (attention_figures, attention_key, attention_probe, ATTN_CALLS, decode_curve, fused_rows_curve, OWN_ROWS, OWN_SIZES, rows_probes,
                               decode_key, decode_probe, decode_sizes, elementwise_curve, elementwise_probe, elementwise_time, EW_PAIR, EW_TOKENS,
                               KV_CONTEXT, kv_gather_bytes, kv_gather_probe, kv_key, KV_MIDDLE, KV_SEQS,
                               kv_size_curve, KV_SIZES, last_level_cache_bytes,
                               matmul_probes, tree_row_probe)  # noqa: E402
from sim.cli import fail  # noqa: E402
from sim.errors import SpecError  # noqa: E402
from sim.cost import attention_geometry, model_shapes  # noqa: E402
from sim.hardware import geometry_label  # noqa: E402
from sim.models import ModelSpec  # noqa: E402
from validation.timing import block_times, host_gap, interleaved_times, mean_time, steady_time  # noqa: E402
from validation.profile import write_profile  # noqa: E402
from validation.traffic import Traffic  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
GEMM_SIZES = ((256, 768), (512, 2048), (1024, 4096), (2048, 8192))  # (k, n): 0.75, 4, 16, 64 MiB fp32
DEEP = 6  # layers of the deeper host-time probe model (against 1: the difference over 5 layers)
# every count up to 8, which a chain of up to 7 drafts verifies at batch 1: the step-time grid's
# Llama-shaped 7-row chains read 20-23% above a curve interpolated between 6 and 8 rows
GEMM_ROWS = (1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 24, 32, 48, 64, 128, 256, 512)
# the host work between two passes of the warm curves: a model's weights wait a step between their
# uses, and on a last-level cache shared with other tenants they leave it meanwhile. The family's
# 17 products at one row read 1.81 ms back to back, 2.0 ms 3 ms apart, 2.3 ms 10 ms apart, 2.7 ms
# 30 ms apart (a 2-core EPYC VM, 32 MB cache; another run: 2.0, 2.2, 2.25, 2.27, cold 2.2); the
# family's decode steps take 5 ms (none, concurrency 1) to 70 ms (EAGLE-2, concurrency 4) here
WARM_GAP_S = 0.005
# probes called several times a round, their calls spread through the cycle (spaced) and pooled:
# the engine's decode steps (step_overhead_us), whose mean over one calibration's 17 calls read
# 365 us (its resamples 265-440) where five other comparisons' read 259-281 (cpu-epyc-zen4/0.56.0)
PROBE_CALLS = {"engine": 3}
# On this VM a page untouched for a few seconds reads slower at its first touch, whatever the
# caches hold: a 512 MB matrix-vector product read 19-20 GB/s back to back, 15.7 / 15.2 / 10.6 /
# 6.4 GB/s on its first pass after 2 / 5 / 10 / 20 s idle, 6.5-14.5 GB/s after 5-20 s of other
# work, 13.5-17.3 GB/s after 5-20 s of streaming another 512 MB, and its second pass 15-20 GB/s
# (2026-12-02, a 2-core EPYC VM). The calibration's cycle comes back to a probe after a minute or
# so, and until 0.22.0 timed its first call: copy and streaming read 10-14 GB/s within
# comparisons where they read 22-29 and 15-21 GB/s called back to back, and the Llama shape's
# one-sequence decodes, memory-bound, read +26% to +42% (+57% to +113% on earlier VMs). So every
# probe's memory is touched by an untimed call right before it is timed (Calibration: timed, cold).


def curve_label(size: list):
    """A matmul curve's key in the profile: [KiB] -> KiB (gemm_rows), [k, n] -> "KxN" (gemm_shapes)."""
    return size[0] if len(size) == 1 else "x".join(map(str, size))


def priced_shapes(models, cache_bytes: int) -> tuple[set, set]:
    """(cold, warm): the matrix shapes whose curves price `models` ((weights' bytes per device,
    {(k, n)}) each), as the simulator prices them (sim.hardware.HardwareSpec.for_weights): a
    model's whose weights fit the last-level cache (`cache_bytes`, 0: unknown) on the warm
    curves, the others' on the cold ones. Timing each shape only where it prices halves the shape
    probes of a one-model trace (the family's eleven shapes had been 37 of a calibration round's
    64 s, cold and warm)."""
    cold, warm = set(), set()
    for weight_bytes, shapes in models:
        (warm if cache_bytes and 0 < weight_bytes <= cache_bytes else cold).update(shapes)
    return cold, warm


def spaced(keys: list, copies: dict) -> list:
    """The round-robin cycle of probes `keys` with each one's further calls (`copies`: {key:
    [the keys of its copies, each a probe giving the same figures], ...}, the copies left out of
    `keys`) spread evenly through it: n calls of a probe a cycle, one every 1/n of it, so they
    see different spells of the host (which holds its speed for seconds at a time)."""
    order = [k for k in keys if not any(k in c for c in copies.values())]
    for key, extra in copies.items():
        start, n = order.index(key), len(extra) + 1
        for i, c in enumerate(extra, 1):
            order.insert((start + round(i * len(order) / n)) % len(order) + 1, c)
    return order


def cold_time(fn, flush: torch.Tensor, device: str) -> float:
    """Seconds of one call of fn right after a write over `flush` (1.5x the last-level cache)
    swept the cache out, its memory touched by an untimed call before the sweep."""
    fn()
    flush.add_(0.0)
    return mean_time(fn, device, 1, warm=False)


class Calibration:
    """This device's probes, run in round-robin rounds; each figure is the mean of the probe's
    calls over all rounds. Other measurements (the step-time grid, compare's engine
    runs) can run between rounds, so the profile and what it predicts see the same spells of a
    drifting host. Sizes are parameters so a test can run the CPU form small."""

    def __init__(self, size_mb: int = 512, gemm_n: int = 1024, device: str = "cpu", context: ModelSpec | None = None,
                 models=None, prompt: int = REUSE_PROMPT, geometries=None, reuse_calls: dict | None = None,
                 probe_calls: dict | None = None):
        """context: the model whose passes' memory traffic the host-time probes run amid
        (validation.traffic; on a CPU only; None: none, the probes' tiny models alone); models:
        the priced models, (weights' bytes per device, {(k, n)} weight matrices) each, whose
        matrices get matmul curves of their own (on a CPU), each where it prices (priced_shapes:
        warm where its weights fit the last-level cache, else cold; None: the context's,
        sim.cost.model_shapes); prompt: the in-situ probe's prompt tokens a sequence
        (validation.reuse.probe_prompt); geometries: the priced models' attention geometries
        (sim.cost.attention_geometry), each of whose decode attention gets a curve of its own on
        a CPU (None: the context's); reuse_calls: {rows: calls a round} of the in-situ probe
        (validation.reuse; None: REUSE_CALLS, or one each in the test-sized form); probe_calls:
        {probe: calls a round} of the others (None: PROBE_CALLS, or one each in the test-sized form)."""
        self.size_mb, self.gemm_n = size_mb, gemm_n
        self.context = context if device == "cpu" else None
        traffic = self.traffic = Traffic.of(self.context, device)
        after_pass = traffic.after_pass() if traffic is not None else None  # a target pass's traffic
        after_drafter = traffic.after_pass(drafter=True) if traffic is not None else None
        n = size_mb * 2**20 // 4
        src = torch.ones(n, device=device)
        dst = torch.empty_like(src)
        mat = torch.ones(max(1, n // 4096), 4096, device=device)
        vec = torch.ones(4096, device=device)
        a = torch.randn(gemm_n, gemm_n, device=device)
        b = torch.randn(gemm_n, gemm_n, device=device)
        one = torch.ones(1, device=device)
        self.dtypes = {"fp32": torch.float32} | ({"bf16": torch.bfloat16} if device == "cuda" else {})
        gemms = {k: (a.to(v), b.to(v)) for k, v in self.dtypes.items()}
        small = gemm_n < 1024  # the test-sized form
        sizes, rows = ((64, 128), (128, 256)) if small else GEMM_SIZES, (1, 4, 16) if small else GEMM_ROWS
        self.cache_bytes = last_level_cache_bytes() if device == "cpu" else 0
        self.curves = matmul_probes(device, sizes, rows, shrink=True) if device == "cpu" else {}
        # the warm curves' pools fit half the last-level cache (none where its size is unknown)
        self.warm = matmul_probes(device, sizes, rows, min(64 << 20, self.cache_bytes // 2), shrink=True) \
            if device == "cpu" and self.cache_bytes else {}
        # a write over 1.5x that cache (at most the copy probe's buffer) evicts the cold curves' weights
        flush = src[:min(src.numel(), self.cache_bytes * 3 // 8)] if self.cache_bytes else src
        self.halves = matmul_probes(device, ((1024, 4096),), (16, 32, 64, 128)) if device == "cpu" else {}
        # the models' own matrices, cold and (those that fit a warm pool) warm: {(k, n, M): (call, FLOPs)}
        if models is None:
            models = [(context.weight_bytes, model_shapes(context))] if context is not None else []
        shapes, warm_shapes = ((sorted(s) if device == "cpu" else []) for s in priced_shapes(models, self.cache_bytes))
        pool = (4 << 20) if small else (64 << 20)
        self.shapes = {(k, n, m): c for k, n in shapes for (_, m), c in matmul_probes(device, [(k, n)], rows, pool, True).items()}
        warm_pool = min(64 << 20, self.cache_bytes // 2)
        self.shapes_warm = {(k, n, m): c for k, n in warm_shapes if 4 * k * n <= warm_pool
                            for (_, m), c in matmul_probes(device, [(k, n)], rows, warm_pool, True).items()}
        self.copy_bytes, self.stream_bytes = 2 * src.numel() * 4, mat.numel() * 4

        # every probe's memory touched right before it is timed: a page left untouched for
        # seconds reads slower at its first touch on a VM (see above Calibration), which an
        # engine, touching its weights every step, does not pay
        def timed(fn, calls: int = 1):
            return lambda: mean_time(fn, device, calls, warm=True)

        def paired(fns: dict, calls: int, between=None):
            return lambda: interleaved_times(fns, device, calls, between)

        # a probe gives one figure, or (a dict of callables) the figures whose differences a
        # figure is: their calls interleaved one by one, so the difference sees one moment
        probes = {"copy": timed(lambda: dst.copy_(src)), "stream": timed(lambda: mat @ vec),
                  "launch": timed(lambda: one.add_(0.0), 50)}
        probes |= {f"gemm_{k}": timed(lambda x=x, y=y: x @ y, 3) for k, (x, y) in gemms.items()}
        # the host-time forwards: 1 and DEEP layers, decoding and verifying a 2-node chain, one
        # sequence and VERIFY_SEQS (what a batch of chains or trees pays per layer beyond a
        # decode: the padded fused-attention path); and the 1-layer forward without the index
        # checks, as the drafters run their passes (amid a target pass's traffic, against the
        # checked one: index_check_s; amid a drafter pass's: pass_s)
        forwards = {f"{kind}{k}": forward_probe(k, device, nodes=nodes, seqs=seqs, plain=plain)
                    for kind, nodes, seqs, plain in (("forward", 0, 1, 0), ("verify", 2, 1, 0),
                                                     ("decodes", 0, VERIFY_SEQS, 0), ("verifies", 2, VERIFY_SEQS, 0),
                                                     ("mixed", 2, VERIFY_SEQS, VERIFY_SEQS // 2))
                    for k in (1, DEEP)}
        forwards["unchecked1"] = forward_probe(1, device, check=False)
        # the same call amid a drafter pass's traffic: a drafter pass's fixed host time (pass_s)
        forwards["drafter1"] = forward_probe(1, device, check=False)
        probes["forwards"] = paired(forwards, 10,
                                    {name: after_drafter if name == "drafter1" else after_pass for name in forwards})
        if device == "cpu":  # real-sized layers and their products, interleaved apart from the hidden-64
            # forwards (a small forward right after their 18 MB of products read 0.2 ms slower)
            probes["layers"] = paired(layer_probes(1, device) | layer_probes(DEEP, device), 10)
        probes["engine"] = lambda: {f"engine{k}": engine_step(k, device, traffic) for k in (1, 16)}
        # where the context model's weights fit the last-level cache (its warm curves price it): a
        # drafter's first pass's host work on its own shape after the trace's prompt (no traffic:
        # its passes are its own), and the engine's products timed in place
        self.reuse_rows = (1, 4) if small else REUSE_ROWS
        in_place = device == "cpu" and self.context is not None and self.cache_bytes \
            and self.context.weight_bytes <= self.cache_bytes
        self.first_vocab = self.context.vocab if in_place else TINY_CHECKPOINT["vocab"]
        probes["draft_first"] = (lambda: first_pass_probe(device, None, checkpoint_of(self.context), prompt)) \
            if in_place else (lambda: first_pass_probe(device, traffic))
        probes["draft_later"] = lambda: later_pass_probe(device, traffic)
        probes["draft_medusa"] = (lambda: medusa_probe(device, None, checkpoint_of(self.context), prompt)) \
            if in_place else (lambda: medusa_probe(device, traffic))
        # (each rows value a probe of its own, the cheap rows called several times a round: copies)
        self.in_place = bool(in_place)
        copies: dict = {}  # probe -> the keys of its further calls a round (spaced)

        def add_copies(first, keys: list) -> None:
            copies[first] = keys
            probes.update({c: probes[first] for c in keys})
        if in_place:
            calls = ({} if small else REUSE_CALLS) if reuse_calls is None else reuse_calls
            for r in self.reuse_rows:
                first = ("reuse", r, 0)
                probes[first] = insitu_probe(self.context, device, (r,), 5 if small else REUSE_STEPS, prompt)
                add_copies(first, [("reuse", r, i) for i in range(1, calls.get(r, 1))])
        # prompt lookup likewise: between the context model's passes it read 1.7-2.6x the hidden-64
        # model's call and 1.1-1.3x its per sequence, as the family's own runs do (0.55.0/ngram_shapes.txt)
        probes["ngram"] = (lambda: ngram_probe(device, None, checkpoint_of(self.context))) if in_place \
            else (lambda: ngram_probe(device, traffic))
        def cold(fn):
            return lambda: cold_time(fn, flush, device)

        # the matmul curves: one pass over their pool, cold; warm, once repeating them a step apart
        # stops making them faster (WARM_GAP_S)
        gap = host_gap(WARM_GAP_S)
        probes |= {("curve", *key): cold(fn) for key, (fn, _) in self.curves.items()}
        probes |= {("warm", *key): lambda fn=fn: steady_time(fn, device, between=gap) for key, (fn, _) in self.warm.items()}
        probes |= {("half", *key): timed(fn, 2) for key, (fn, _) in self.halves.items()}
        probes |= {("shape", *key): cold(fn) for key, (fn, _) in self.shapes.items()}
        probes |= {("shapew", *key): lambda fn=fn: steady_time(fn, device, between=gap)
                   for key, (fn, _) in self.shapes_warm.items()}
        # the gather, each size on its own: on a CPU cold (kv_sizes) and, where the cache's size is
        # known, warm: once repeating it stops making it faster (kv_sizes_warm); elsewhere the middle size alone, two
        # calls (the first refills what the copy probe swept out), gives eta_kv
        if device == "cpu":
            gathers = {size: kv_gather_probe(device, *size) for size in KV_SIZES}
            probes |= {kv_key("kv", *size): cold(fn) for size, fn in gathers.items()}
            if self.cache_bytes:
                probes |= {kv_key("kvw", *size): lambda fn=fn: steady_time(fn, device, between=gap)
                           for size, fn in gathers.items()}
            # each priced geometry's decode attention at the same sizes (kv_decode, kv_decode_warm)
            if geometries is None:
                geometries = [attention_geometry(context)] if context is not None else []
            self.geometries = sorted({g for g in geometries if g is not None})
            decodes = {(g, size): decode_probe(device, *size, g) for g in self.geometries for size in decode_sizes(g)}
            probes |= {decode_key("dec", g, *size): cold(fn) for (g, size), fn in decodes.items()}
            if self.cache_bytes:
                probes |= {decode_key("decw", g, *size): lambda fn=fn: steady_time(fn, device, between=gap)
                           for (g, size), fn in decodes.items()}
        else:
            self.geometries = []
            probes[kv_key("kv", KV_SEQS, KV_CONTEXT)] = timed(kv_gather_probe(device), 2)
        # a drafter pass's single query rows as tree nodes against plain decodes (tree_row_s), on
        # the first priced geometry (the family's where none is known)
        probes["tree_row"] = paired(tree_row_probe(device, next(iter(self.geometries), (2, 2, 64))), 20)
        probes["speed"] = speed_probe(device, 0.3 if small else SPEED_WINDOW_S)  # (start, a window's block rates)
        probes["logits"] = paired({f"logits{v}": logit_probe(device, v) for v in LOGIT_VOCABS}, 3)
        probes["verify_host"] = paired(verify_host_probe(device), 20, after_pass)
        probes["draft_logits"] = paired({f"dlogits{v}": draft_logit_probe(device, v) for v in LOGIT_VOCABS}, 3)
        probes["draft_tree"] = paired({f"dtree{k}": draft_tree_probe(device, k) for k in DRAFT_TREE_TOPK}, 3,
                                      after_drafter)
        # the torch reference (CPU) gathers the keys, then computes; the GPU kernel's products at
        # this size take microseconds, so it keeps eta_attn 1 (the roofline) unmeasured
        self.serial = device == "cpu"
        if self.serial:
            # the short contexts' calls interleaved apart from the longest's (a call right after
            # one whose gather sweeps the caches reads slower)
            longest = max(c for _, _, c, _ in ATTN_CALLS)
            for name, calls in (("attn_short", [a for a in ATTN_CALLS if a[2] < longest]),
                                ("attn_long", [a for a in ATTN_CALLS if a[2] == longest])):
                probes[name] = paired({attention_key(*a): attention_probe(device, *a) for a in calls}, 2)
            probes["attn_rows"] = paired(rows_probes(device), 2)
            probes["attn_own"] = paired(rows_probes(device, OWN_SIZES, OWN_ROWS), 2)
            elementwise = {f"ew{n}": elementwise_probe(device, n) for n in EW_TOKENS}
            probes["elementwise"] = lambda: block_times(elementwise, 3)
        for key, calls in (({} if small else PROBE_CALLS) if probe_calls is None else probe_calls).items():
            add_copies(key, [(key, i) for i in range(1, calls)])
        self.probes = probes
        for fn in {id(fn): fn for fn in probes.values()}.values():  # warm-up (a copy's call once)
            fn()
        self.samples: dict = {}  # figure name -> its calls' mean times
        self.series: list[tuple[float, list[float]]] = []  # the speed probe's windows: (start s, block rates)
        self.calls = {k: 0 for k in probes}
        self.figure_names: dict = {}  # probe -> the names its calls give (one call of them each, in order)
        self._order = spaced(list(probes), copies)
        self._next = 0  # the probe the next tick runs

    def round(self) -> None:
        """One call of every probe, from wherever the last tick stopped."""
        self.tick(len(self._order))

    def tick(self, n: int = 1) -> None:
        """The next `n` probes of the round-robin cycle: called between the measurements a
        profile predicts, so the probes' calls spread over the same minutes as those (this host
        swings by up to 1.8x within seconds, in spells of about ten)."""
        for _ in range(n):
            k = self._order[self._next]
            got = self.probes[k]()
            if isinstance(got, tuple):
                self.series.append(got)
            for name, t in (got.items() if isinstance(got, dict) else () if isinstance(got, tuple) else ((k, got),)):
                self.samples.setdefault(name, []).append(t)
                self.figure_names.setdefault(k, {})[name] = None
            self.calls[k] += 1
            self._next = (self._next + 1) % len(self._order)

    def spread(self, intervals: int, cycles: int):
        """A call that runs the next few probes, enough that every `intervals` calls of it make
        `cycles` cycles (share_of_call; at least one probe each): put it between the measurements
        predicted. Until 0.57.0 each call ran the rounded-up share, so the calls overshot and
        `complete` then ran most of a further cycle after the last measurement (a minute of the
        CI-sized comparison's eight and a half)."""
        per_call = cycles * len(self._order) / max(1, intervals)
        made = itertools.count()

        def call() -> None:
            self.tick(share_of_call(next(made), per_call))
        return call

    def complete(self) -> None:
        """Finish the current cycle, so every probe has as many calls as the others (and one at least)."""
        if self._next or not self.calls[self._order[0]]:
            self.tick(len(self._order) - self._next)

    def figures(self) -> dict:
        """Every probe's figure from its calls so far (every probe called at least once: `complete`)."""
        return self.figures_of(self.samples, allocator_op())

    def resampled(self, rng: np.random.Generator) -> dict:
        """One bootstrap resample of the calls so far, as `figures_of` takes them: each probe's
        calls drawn with replacement, the figures of one call of a paired probe kept together
        (their difference is the figure)."""
        samples = {}
        for names in {tuple(n): n for n in self.figure_names.values()}.values():  # a probe's copies once
            first = next(iter(names))
            pick = rng.integers(0, len(self.samples[first]), len(self.samples[first]))
            samples |= {name: [self.samples[name][i] for i in pick] for name in names}
        return samples

    def bootstrap(self, n: int, seed: int = 0) -> list[dict]:
        """The figures of `n` bootstrap resamples of the calls so far (`resampled`): how far the
        profile moves with the calls it happened to get. The calls are taken as independent:
        they spread over minutes, a few probes between the measurements they predict, on a host
        whose speed holds for seconds at a time."""
        rng = np.random.default_rng(seed)
        alloc = allocator_op()
        return [self.figures_of(self.resampled(rng), alloc) for _ in range(n)]

    def figures_of(self, samples: dict, alloc_s: float) -> dict:
        """The figures from probe calls `samples` (name -> its calls' times), the speed windows
        so far and the allocator's seconds an operation `alloc_s`."""
        t = {k: statistics.mean(v) for k, v in samples.items()}
        n3 = self.gemm_n ** 3
        out = {"copy_bw": self.copy_bytes / t["copy"], "stream_bw": self.stream_bytes / t["stream"],
               "launch_s": t["launch"], "rounds": min(self.calls.values())}
        out |= {f"flops_{k}": 2 * n3 / t[f"gemm_{k}"] for k in self.dtypes}
        peak = out["flops_fp32"]
        # the probe models' own layers (hidden 64), which the figures below take off their calls
        per_layer = max(0.0, (t[f"forward{DEEP}"] - t["forward1"]) / (DEEP - 1))
        per_seq = max(0.0, (t["engine16"] - t["engine1"]) / 15)
        out |= {"probe_layer_s": per_layer,
                "seq_s": per_seq, "step_s": max(0.0, t["engine1"] - per_layer - per_seq),
                "pass_s": max(0.0, t["drafter1"] - per_layer),
                "index_check_s": max(0.0, t["forward1"] - t["unchecked1"]),
                "tree_row_s": max(0.0, t["rowtree"] - t["rowplain"]),
                "multi_query_s": max(0.0, (t[f"verify{DEEP}"] - t["verify1"]) / (DEEP - 1) - per_layer)}
        row = draft_logit_time(*(t[f"dlogits{v}"] for v in LOGIT_VOCABS))  # a drafter's logit element
        out |= drafter_host_figures(t, self.first_vocab * row, TINY_CHECKPOINT["vocab"] * row)
        out |= medusa_host_figures(t, self.first_vocab * row)  # on the first pass's model
        batched = (t[f"verifies{DEEP}"] - t["verifies1"] - t[f"decodes{DEEP}"] + t["decodes1"]) / (DEEP - 1)
        out["batch_query_s"] = max(0.0, batched - out["multi_query_s"])
        # half the sequences verifying, half decoding, against all verifying: per layer
        out["mixed_query_s"] = max(0.0, (t[f"mixed{DEEP}"] - t["mixed1"] - t[f"verifies{DEEP}"] + t["verifies1"]) / (DEEP - 1))
        out["alloc_op_s"] = alloc_s
        out["gemm_half_rows"] = statistics.median(  # rate peak * M / (M + M0) -> M0 = t * peak / flops * M - M
            max(0.0, t[("half", *key)] * peak / flops * key[1] - key[1]) for key, (_, flops) in self.halves.items()
        ) if self.halves else 0.0
        # {KiB or "KxN": [[rows, fraction of the peak], ...]} per curve, as the profile writes them
        for name, key, probes in (("gemm_rows", "curve", self.curves), ("gemm_rows_warm", "warm", self.warm),
                                  ("gemm_shapes", "shape", self.shapes), ("gemm_shapes_warm", "shapew", self.shapes_warm)):
            if probes:
                table: dict = {}
                for (*size, m), (_, flops) in probes.items():
                    table.setdefault(curve_label(size), []).append([m, round(flops / (t[(key, *size, m)] * peak), 4)])
                out[name] = table
        out |= insitu_figures(t, self.context, out.get("gemm_shapes_warm", {}), peak, self.reuse_rows) \
            if self.in_place else {"gemm_reuse": [], "gemm_step": []}
        out["cache_bytes"] = self.cache_bytes
        out["warm_gap_s"] = WARM_GAP_S  # the host work between two passes of the warm curves
        tr = self.traffic  # the memory traffic the host-time probes ran amid (validation.traffic)
        out["context"] = (self.context.name, tr.target_bytes, tr.drafter_bytes) if tr is not None else None
        # a family-shaped layer's host time beyond what the cost model charges for its products
        products = layer_products_time(out.get("gemm_rows", {}), peak, out["stream_bw"], DEEP,
                                       out.get("gemm_rows_warm"), self.cache_bytes, out.get("gemm_shapes"),
                                       out.get("gemm_shapes_warm"))
        out["layer_s"] = layer_time(t, DEEP, products) if "layer1" in t else per_layer
        out["kv_sizes"] = kv_size_curve(t, out["stream_bw"]) if self.serial else []
        out["kv_sizes_warm"] = kv_size_curve(t, out["stream_bw"], "kvw") if self.serial and self.cache_bytes else []
        # the gather rate: the curve's at the middle size (its call's fixed part out), else the middle probe's
        out["kv_gather_bw"] = out["kv_sizes"][KV_MIDDLE][1] * out["stream_bw"] if out["kv_sizes"] \
            else kv_gather_bytes() / t[kv_key("kv", KV_SEQS, KV_CONTEXT)]
        # the attention probes' 16 MiB of keys stay in the cache between their calls: beside the
        # gather at its warm rate where measured
        gather_bw = out["kv_sizes_warm"][KV_MIDDLE][1] * out["stream_bw"] if out["kv_sizes_warm"] else out["kv_gather_bw"]
        out["eta_attn"], out["fused_query_s"], out["fused_key_s"] = attention_figures(t, gather_bw, peak) \
            if self.serial else (1.0, 0.0, 0.0)
        out["attn_dense"] = self.serial
        # the fused call's per-key part by its query rows (ns), its products as priced taken off
        out["fused_rows"] = fused_rows_curve(t, gather_bw, 1.0 / (out["eta_attn"] * peak)) if self.serial else {}
        # and in a sequence's call of its own (a lone chain, a prefill chunk)
        out["fused_own"] = fused_rows_curve(t, gather_bw, 1.0 / (out["eta_attn"] * peak), OWN_SIZES, OWN_ROWS) \
            if self.serial else {}
        # the decode curves, the products (on the compute roof at eta_attn, as priced) taken off
        out["kv_decode"], out["kv_decode_warm"] = {}, {}
        for g in self.geometries:
            kv, group, d = g

            def products(seqs, keys, per_pair=4.0 * kv * group * d / (out["eta_attn"] * peak)):
                return per_pair * seqs * keys

            out["kv_decode"][geometry_label(g)] = decode_curve(t, g, out["stream_bw"], products)
            if self.cache_bytes:
                out["kv_decode_warm"][geometry_label(g)] = decode_curve(t, g, out["stream_bw"], products, "decw")
        out["elementwise_s"] = elementwise_time(*(t[f"ew{n}"] for n in EW_PAIR)) if self.serial else 0.0
        out["elementwise_sizes"] = elementwise_curve(t) if self.serial else []
        # (the engine-step probes' own 256-entry logits, under a microsecond a sequence, stay in seq_s)
        out["logit_s"] = logit_time(*(t[f"logits{v}"] for v in LOGIT_VOCABS))
        out["draft_logit_s"] = draft_logit_time(*(t[f"dlogits{v}"] for v in LOGIT_VOCABS))
        out["draft_cand_s"] = draft_cand_time(*(t[f"dtree{k}"] for k in DRAFT_TREE_TOPK))
        out["ngram_call_s"], out["ngram_seq_s"] = ngram_times(t)
        # one verification call: the engine-step probe's decode steps made one each (step_s has it)
        out |= verify_host_figures(t, out["logit_s"])
        out |= {"spec_step_s": 0.0, "spec_seq_s": 0.0}  # a speculative step's rest beyond a decode's: in place, below
        out["step_s"] = max(0.0, out["step_s"] - out["verify_call_s"])
        # fast spells within the windows (each block over its window's mean), drift between them
        within = [np.asarray(r) / np.mean(r) for _, r in self.series if len(r)]
        out["speed_rates"], out["speed_spell_s"] = spread_of(within, SPEED_BLOCK_S)
        out["speed_drift_rates"], out["speed_drift_s"] = drift_of(self.series, SPEED_BLOCK_S,
                                                                (out["speed_rates"], out["speed_spell_s"]))
        # the context model's later layer timed in the engine, less its price but for host time: a
        # layer's host time where measured (since 0.53.0), the family-shaped probes' kept beside it
        out["shape_layer_s"] = out["layer_s"]
        if self.in_place:
            out |= layer_in_place(t, layer_price(out, self.context), self.reuse_rows)
            # and chains' attention in place beyond its price, a verifying sequence's (since 0.54.0)
            out |= verify_seq_table(t, attention_price(out, self.context), self.reuse_rows)
            # and a speculative step's rest beyond a decode's, beyond its price (since 0.56.0)
            out |= spec_rest_figures(t, out, self.context, self.reuse_rows)
        # the probes' passes have LM heads, whose launches the cost model charges on top of a
        # pass's fixed host time (since 0.32.0 taken off it: they were charged twice)
        out["step_s"], out["pass_s"] = (pass_fixed_time(out[k], out["layer_s"]) for k in ("step_s", "pass_s"))
        return out


def measure(size_mb: int = 512, gemm_n: int = 1024, repeats: int = 7, device: str = "cpu",
            context: ModelSpec | None = None, geometries=None) -> dict:
    """Every probe's figure over `repeats` rounds (Calibration, amid `context`'s memory traffic;
    decode curves for `geometries`, None: the context's)."""
    cal = Calibration(size_mb, gemm_n, device, context, geometries=geometries)
    for _ in range(max(1, repeats)):
        cal.round()
    return cal.figures()


DEFAULT_CONTEXT = "tiny"


def share_of_call(i: int, per_call: float) -> int:
    """Probes that call `i` (from 0) of a spread runs, `per_call` a call on average: the rounded
    running total's step (half up), so any whole number of calls' shares adds up to their total
    rounded, and a whole number of cycles exactly; at least one."""
    return max(1, math.floor((i + 1) * per_call + 0.5) - math.floor(i * per_call + 0.5))


def for_trace(trace, spec: ModelSpec) -> "Calibration":
    """The calibration that prices `trace` run on the engine's model `spec`: its host-time probes
    amid that model's memory traffic (validation.traffic), the matmul curves of its target's and
    drafters' own matrices (sim.cost.model_shapes) at the residency they price at, and the
    engine's products timed in place after the trace's median prompt (validation.reuse)."""
    drafters = [s.drafter_spec()[0] for s in trace.speculation if hasattr(s, "drafter_spec")]
    return Calibration(context=spec, models=[(spec.weight_bytes / trace.tp, model_shapes(spec, trace.tp).union(
        *(s.matrix_shapes(spec, trace.tp) for s in trace.speculation)))], prompt=probe_prompt(trace),
        geometries=[attention_geometry(m, trace.tp) for m in [spec, *drafters]])


def context_model(name: str) -> ModelSpec | None:
    """The model `--context` names (a preset or a YAML path; "none": None). A bad name is a
    SpecError (the CLI prints it and exits with 2)."""
    if name.lower() == "none":
        return None
    from sim.models import model_from_node
    from sim.specio import Node
    return model_from_node(Node(name, "command line", "--context"), ROOT)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m validation.calibrate", description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None, help="profile path (default traces/hardware/<device>-measured.yaml)")
    ap.add_argument("--size-mb", type=int, default=512)
    ap.add_argument("--gemm", type=int, default=1024)
    ap.add_argument("--repeats", type=int, default=7, help="rounds of every probe (the mean kept)")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--context", default=DEFAULT_CONTEXT,
                    help="the model (preset name or path) whose passes' memory traffic the host-time probes run amid, "
                         f"on a CPU (default {DEFAULT_CONTEXT}, the trained family the CPU traces run; none: no traffic)")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    retain_freed_memory()  # as `python -m engine` runs (engine/host_memory.py)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        context = context_model(args.context)
    except SpecError as exc:
        return fail(exc)
    m = measure(args.size_mb, args.gemm, args.repeats, device, context)
    out = args.out or ROOT / "traces" / "hardware" / f"{'gpu' if device == 'cuda' else 'cpu'}-measured.yaml"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(write_profile(m, args.size_mb))
    print(out.read_text())
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
