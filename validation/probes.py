"""The calibration's device microbenchmarks (validation/calibrate.py says what each one measures
and which profile field it gives): bandwidth, the matmul curves, the last-level cache, the KV
gather, attention and the elementwise passes. Each builder sets up its tensors once and returns
the call to time, so validation.calibrate.Calibration can run them round-robin, a few at a time;
the host-time probes are in validation/host_probes.py, the timers in validation/timing.py."""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import torch

from sim import trees as T
from sim.cost import GROUP_MAX
from sim.hardware import geometry_label
from sim.models import ModelSpec
from validation.timing import device_sync


# a matmul curve's pool, above POOL_ROWS rows: shrunk with the rows (each call then does the FLOPs of
# POOL_ROWS rows over the whole pool), to POOL_MIN_BYTES at least. With the freed memory retained
# (engine/host_memory.py), 32-512 rows read the same rate either way: over five shapes x six row
# counts x six rounds (2026-12-04, Zen 3 VM), the shrunk pool's rate over the full one's was
# 0.981 +- 0.010 cold (the 16-row control, the same pool both: 0.994 +- 0.031) and 1.002 +- 0.010
# warm. The full pools at 128-512 rows had made a calibration round's matmul curves 80% of its time.
POOL_ROWS = 16
POOL_MIN_BYTES = 8 << 20


def matmul_probes(device: str, sizes, rows, pool_bytes: int = 64 << 20, shrink: bool = False) -> dict:
    """{(weight KiB, M): (call, FLOPs of one call)}: `x @ W.T` (x: (M, k), W: (n, k)) over
    distinct matrices filling `pool_bytes` (one at least), as a forward pass meets each weight
    once (a matrix multiplied again straight away sits in L2 and runs up to 4x faster).
    `shrink`: above POOL_ROWS rows a call takes only the first matrices of the pool, enough for
    pool_bytes * POOL_ROWS / M (POOL_MIN_BYTES at least): for probes whose pool sits where it
    should before each call (swept out of the caches, or settled in them), not for one whose
    pool's size keeps it out of the cache."""
    out = {}
    for k, n in sizes:
        ws = [torch.randn(n, k, device=device) for _ in range(max(1, pool_bytes // (4 * k * n)))]
        for m in rows:
            x = torch.randn(m, k, device=device)  # (M, k)
            used = ws
            if shrink and m > POOL_ROWS:
                keep = max(min(pool_bytes, POOL_MIN_BYTES), pool_bytes * POOL_ROWS // m)
                used = ws[:max(1, keep // (4 * k * n))]
            out[(k * n * 4 // 1024, m)] = (lambda x=x, ws=used: [x @ w.T for w in ws], 2 * m * k * n * len(used))
    return out


def last_level_cache_bytes(cpu: Path = Path("/sys/devices/system/cpu/cpu0/cache")) -> int:
    """The bytes of this CPU's last-level cache (the highest level sysfs lists for cpu0: 32 MiB
    on this VM, 300 MiB on an earlier one), 0 where the system does not say."""
    best = (0, 0)
    for index in cpu.glob("index*"):
        try:
            level = int((index / "level").read_text())
            text = (index / "size").read_text().strip()
            if (index / "type").read_text().strip() == "Instruction":
                continue
        except (OSError, ValueError):
            continue
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:].upper(), 1)
        digits = text.rstrip("KkMmGg")
        if digits.isdigit():
            best = max(best, (level, int(digits) * scale))
    return best[1]


KV_HEADS, KV_DIM = 8, 64
# the trained family's KV heads and query heads: the small gathers' geometry (its 512-byte rows
# of K or V, where 8 KV heads read 2 KiB ones)
SMALL_KV_HEADS, SMALL_Q_HEADS = 2, 4
# the gather probes' (sequences, keys each, KV heads): 0.5, 2, 8, 32 and 128 MiB of K and V a
# call. The 32 MiB one gives eta_kv; all five its curve over sizes (kv_sizes). The two small ones
# are the family's own decode attention at 4 and 16 sequences (a small model's gathers are that
# small), the large ones a Llama-shaped model's. A size up to the second reads at the first
# stretch's rate (average_per_unit), so with 8 MiB first, on a VM with a 32 MB last-level cache,
# every gather up to 32 MiB read at the 8-32 MiB stretch's, which spills that cache: the
# step-time grid's family decodes read +24.5% (signed median), +88% at 4 sequences and 2,048
# keys; with these sizes -13% to +12%, but for the two at 8 MiB a layer (+37%, +39%: priced on
# the cold curve, timed warm by the grid's repeated calls).
# On a VM with a 300 MB cache: 4.0-4.4 GB/s up to 34 MB, 3.1 GB/s at 134 MB.
KV_SIZES = ((4, 128, SMALL_KV_HEADS), (16, 128, SMALL_KV_HEADS), (8, 256, KV_HEADS), (8, 1024, KV_HEADS),
            (16, 2048, KV_HEADS))
KV_SEQS, KV_CONTEXT = 8, 1024
KV_MIDDLE = KV_SIZES.index((KV_SEQS, KV_CONTEXT, KV_HEADS))  # the size whose rate is eta_kv


def kv_key(prefix: str, seqs: int, context: int, kv_heads: int = KV_HEADS) -> str:
    """A gather probe's name among the calibration's figures ("kv" cold, "kvw" warm)."""
    return f"{prefix}{seqs}x{context}" + (f"h{kv_heads}" if kv_heads != KV_HEADS else "")


def kv_gather_bytes(seqs: int = KV_SEQS, context: int = KV_CONTEXT, kv_heads: int = KV_HEADS,
                    head_dim: int = KV_DIM) -> int:
    """Bytes of K and V (fp32) that kv_gather_probe (or a decode_probe of that geometry) reads a call."""
    return 2 * seqs * context * kv_heads * head_dim * 4


def kv_gather_probe(device: str, seqs: int = KV_SEQS, context: int = KV_CONTEXT, kv_heads: int = KV_HEADS):
    """The engine's paged attention with `seqs` sequences each decoding one token over `context`
    keys (`kv_heads` KV heads of KV_DIM, fp32), kv_gather_bytes per call. With KV_HEADS, one
    query head per KV head, so the scores' FLOPs stay small beside the gather: the cost model
    prices them separately, on the compute roof (a GQA group of 4 read as bandwidth would charge
    a model with groups of 2 for FLOPs it does not do); with SMALL_KV_HEADS, the family's
    SMALL_Q_HEADS query heads (its own decode attention)."""
    heads = SMALL_Q_HEADS if kv_heads == SMALL_KV_HEADS else kv_heads
    return _paged_attention_call(device, seqs, context - 1, 1, heads, kv_heads)


def kv_size_curve(t: dict, stream_bw: float, prefix: str = "kv") -> list[list[float]]:
    """[[MiB, eta_kv], ...] from the gather probes' mean times `t` (kv_key(prefix, *size) for
    each of KV_SIZES: "kv" cold, "kvw" warm): each size's rate (average_per_unit: a call's
    fixed part left out, which the layer's host time, launch_us, holds) against the
    weight-streaming bandwidth, at most 1 (and at least the last place written)."""
    sizes = [kv_gather_bytes(*size) for size in KV_SIZES]
    return eta_curve(sizes, [t[kv_key(prefix, *size)] for size in KV_SIZES], stream_bw)


def eta_curve(nbytes: list[int], times: list[float], stream_bw: float) -> list[list[float]]:
    """[[MiB, eta], ...] from mean call times at ascending byte sizes: each size's rate
    (average_per_unit, the calls' fixed part out) against the streaming bandwidth, at most 1."""
    per_byte = average_per_unit(nbytes, times)
    return [[b / 2**20, float(printed(min(1.0, 1.0 / (x * stream_bw))))] for b, x in zip(nbytes, per_byte)]


def decode_sizes(geometry: tuple[int, int, int]) -> list[tuple[int, int]]:
    """(sequences, keys each) of the decode probes for a model's attention `geometry` (KV heads,
    query heads per KV head, head_dim; sim.cost.attention_geometry): KV_SIZES' sequences and
    bytes of fp32 K and V a call, the keys scaled to the geometry's rows."""
    kv, _, d = geometry
    return [(s, max(1, round(kv_gather_bytes(s, c, h) / kv_gather_bytes(s, 1, kv, d)))) for s, c, h in KV_SIZES]


def decode_probe(device: str, seqs: int, context: int, geometry: tuple[int, int, int]):
    """The engine's paged attention with `seqs` sequences each decoding one token over `context`
    keys in `geometry` (KV heads, query heads per KV head, head_dim; fp32): a decode layer's
    attention as a model of that geometry runs it, gather and products together. On the CPU
    reference the products' cost depends on the geometry, not only on the bytes: over the same
    32 MiB the per-head products of 2 query heads per KV head took 1.5-1.9x those of 1, the whole
    call 1.2-1.4x, and 8 per KV head 2.7x and 2.1x (2026-12-06, 2-core EPYC VM:
    validation/results/cpu-epyc-zen3/0.49.0/decode_geometry.txt)."""
    kv, group, d = geometry
    return _paged_attention_call(device, seqs, context - 1, 1, kv * group, kv, head_dim=d)


def decode_curve(t: dict, geometry: tuple[int, int, int], stream_bw: float, products_s, prefix: str = "dec") -> list:
    """[[MiB, eta], ...] of a geometry's decode probes (mean times `t` under decode_key(prefix,
    geometry, seqs, keys)), as kv_size_curve reads the gather's: each size's rate against the
    weight-streaming bandwidth, its call's fixed part out, after `products_s(seqs, keys)` (the
    products as the cost model prices them, on the compute roof) is taken off its time."""
    kv, _, d = geometry
    sizes = decode_sizes(geometry)
    times = [max(1e-9, t[decode_key(prefix, geometry, s, c)] - products_s(s, c)) for s, c in sizes]
    return eta_curve([kv_gather_bytes(s, c, kv, d) for s, c in sizes], times, stream_bw)


def decode_key(prefix: str, geometry: tuple[int, int, int], seqs: int, context: int) -> str:
    """A decode probe's name among the calibration's figures ("dec" cold, "decw" warm)."""
    return f"{prefix}{geometry_label(geometry)}:{seqs}x{context}"


def printed(x: float) -> float:
    """A curve's value as a profile writes it: four places, and never 0 (its values must be
    positive; a stretch of sizes no slower than the one before, as the small test form can read,
    has its rate floored near zero in average_per_unit)."""
    return max(1e-4, round(x, 4))


def average_per_unit(sizes: list[float], times: list[float]) -> list[float]:
    """Each size's time per unit (byte, element) from one probe's mean times at ascending sizes,
    the calls' fixed part left out: between consecutive sizes the extra time per extra unit is
    that stretch's rate (never below 1e-15); a size up to the second reads at the first rate
    all along, a larger one adds each later stretch at its own."""
    rates = [max(1e-15, (t1 - t0) / (b1 - b0)) for b0, b1, t0, t1 in zip(sizes, sizes[1:], times, times[1:])]
    ends = [sizes[0] * rates[0], sizes[1] * rates[0]]  # each size's time, its fixed part out
    for k in range(1, len(rates)):
        ends.append(ends[-1] + (sizes[k + 1] - sizes[k]) * rates[k])
    return [e / b for b, e in zip(sizes, ends)]


ATTN_HEADS = 4  # the trained family's query heads (on KV_HEADS // 4 KV heads of KV_DIM)
# the attention probes' calls: (sequences, query tokens each, context, drafts). The fused path
# (several sequences verifying chains of 8 and 64 tokens: a root and its drafts) at 4 and 16
# sequences after 128, 200 and 1,024 keys; and the path a sequence takes on its own (one
# verifying alone; prefill chunks of 128 and 512 causal tokens, more than the fused call's 64,
# in 1 to 8 sequences, after 0 to 512 keys). One fit over both paths, the calls spread over the
# shapes the family's steps take (fitted to the first four alone, the parts per query and per
# key swung from 0.6 to 1.0 us and from 0 to 95 ns between calibrations).
ATTN_CALLS = ((16, 8, 128, True), (16, 64, 128, True), (16, 8, 1024, True), (16, 64, 1024, True),
              (4, 64, 128, True), (4, 8, 1024, True), (4, 64, 200, True), (16, 64, 200, True),
              (1, 8, 200, True), (1, 64, 200, True),
              (1, 128, 0, False), (4, 128, 0, False), (8, 128, 0, False), (1, 128, 512, False),
              (2, 128, 256, False), (1, 512, 0, False))


def attention_key(seqs: int, queries: int, context: int, drafts: bool) -> str:
    """A call's figure name: attn{seqs}x{queries}c{context}, v (verifying chains) or p (prefill)."""
    return f"attn{seqs}x{queries}c{context}{'v' if drafts else 'p'}"


def attention_probe(device: str, seqs: int, queries: int, context: int, drafts: bool):
    """The engine's paged attention for one of ATTN_CALLS: `seqs` sequences each with `queries`
    query tokens (drafts: a root and a chain of queries - 1 drafts, ancestor masks and all; else
    causal prefill tokens) after `context` keys, ATTN_HEADS query heads on KV_HEADS // 4 KV heads
    of KV_DIM, the trained family's shape; fp32."""
    return _paged_attention_call(device, seqs, context, queries, ATTN_HEADS, KV_HEADS // 4, drafts=drafts)


def _paged_attention_call(device: str, seqs: int, context: int, queries: int, heads: int, kv_heads: int,
                          drafts: bool = False, head_dim: int = KV_DIM):
    """A call of the engine's paged attention (unchecked) over attention_args' batch."""
    return _unchecked_call(device, attention_args(device, seqs, context, queries, heads, kv_heads, drafts, head_dim))


def _unchecked_call(device: str, args: tuple):
    """A call of the engine's paged attention on `args` (attention_args'), unchecked as the
    drafters run it, with the reference on a CPU and the Triton kernel elsewhere."""
    from kernels import get_ops
    ops = get_ops("torch" if device == "cpu" else "triton", check_values=False)
    return lambda: ops.paged_attention(*args, 0.125)


TREE_ROW_SEQS, TREE_ROW_CONTEXT, TREE_ROW_DEPTH = 4, 200, 3  # the tree-row probe's batch, keys, node depth


def tree_row_probe(device: str, geometry: tuple[int, int, int]) -> dict:
    """{"rowplain": call, "rowtree": call}: the engine's paged attention (unchecked, as drafters
    run it) over TREE_ROW_SEQS sequences in `geometry` (KV heads, query heads per KV head,
    head_dim), each with one query after TREE_ROW_CONTEXT keys: a plain decode, and the same
    query as a drafted node TREE_ROW_DEPTH deep in its sequence's tree (tree_start before its
    ancestors, their bits set), as a drafter's later pass lays out a chain's node
    (engine.drafting.store.pack). Their difference is what the tree costs such a call:
    hardware.tree_row_s (on the CPU reference, _visible's scatter of the ancestors' bits)."""
    kv, group, d = geometry
    plain = attention_args(device, TREE_ROW_SEQS, TREE_ROW_CONTEXT, 1, kv * group, kv, head_dim=d)
    start = torch.full_like(plain[7], TREE_ROW_CONTEXT - TREE_ROW_DEPTH + 1)  # (seqs,)
    anc = torch.full_like(plain[8], (1 << TREE_ROW_DEPTH) - 1)  # (seqs,) the node and its ancestors
    return {"rowplain": _unchecked_call(device, plain), "rowtree": _unchecked_call(device, (*plain[:7], start, anc))}


def attention_args(device: str, seqs: int, context: int, queries: int, heads: int, kv_heads: int,
                   drafts: bool = False, head_dim: int = KV_DIM) -> tuple:
    """The paged-attention arguments before the scale (q, k, v, kv_slots, kv_lens, q_seq, q_pos,
    tree_start, q_anc) for `seqs` sequences each with `queries` query tokens after `context`
    keys, `heads` query heads on `kv_heads` KV heads of `head_dim` (fp32, random). drafts: the
    queries are a root and a chain of drafts behind it (as a verification lays them out: a tree
    start and ancestor masks), else causal tokens."""
    from kernels.attention import NO_TREE, ancestor_masks
    per = context + queries
    k = torch.randn(seqs * per, kv_heads, head_dim, device=device)                # (slots, kv_heads, head_dim)
    v = torch.randn(seqs * per, kv_heads, head_dim, device=device)
    q = torch.randn(seqs * queries, heads, head_dim, device=device)               # (tokens, heads, head_dim)
    kv_slots = torch.arange(seqs * per, device=device).view(seqs, per)
    lens = torch.full((seqs,), per, device=device)
    qs = torch.arange(seqs, device=device).repeat_interleave(queries)
    qp = torch.arange(context, per, device=device).repeat(seqs)
    if drafts and queries > 1:
        ts = torch.full((seqs,), context + 1, device=device)
        anc = torch.tensor([0] + ancestor_masks(T.chain(queries - 1)), device=device).repeat(seqs)
    else:
        ts = torch.full((seqs,), NO_TREE, device=device)
        anc = torch.zeros(seqs * queries, dtype=torch.int64, device=device)
    return q, k, v, kv_slots, lens, qs, qp, ts, anc


def attention_figures(t: dict, gather_bw: float, peak: float) -> tuple[float, float, float]:
    """(eta_attn, fused_query_s, fused_key_s) from the mean times `t` of ATTN_CALLS
    (attention_key names). A call is taken to cost a fixed part plus, for each sequence, a part
    per query token and per gathered key (per query head) and a part per product (each query
    against all its sequence's gathered keys, as the reference computes them); a least-squares
    fit of the calls' relative errors gives them (a part that reads negative is taken as 0 and
    the others fitted again). The part per product, against its FLOPs (4 x heads x head_dim),
    -> eta_attn as a fraction of the GEMM peak (held to 0.01-1, the others then fitted beside
    it); per query head -> fused_query_s (the padded call scatters each query's rows, mask row
    and output and walks its ancestor bits; a call of a sequence's own builds its mask rows);
    per key and query head beyond reading it at the KV gather rate `gather_bw` (which decoding
    sequences pay) -> fused_key_s (transposed copies, masked per-key work). The fixed part
    (0.4-0.6 ms a call here, whatever its path: a decode's too) is left to the host time a
    layer pays (launch_us) and a pass with several query tokens adds (multi_query_s and beyond).
    A fit to the family's in-forward attention timings read 1.3 us a query head."""
    flops = 4 * ATTN_HEADS * KV_DIM  # a product's, all query heads
    rows, times = [], []
    for s, q, c, drafts in ATTN_CALLS:
        keys = c + q
        rows.append([1.0, ATTN_HEADS * s * q, ATTN_HEADS * s * keys, flops * s * q * keys])
        times.append(t[attention_key(s, q, c, drafts)])
    rows_, times_ = np.array(rows), np.array(times)
    per_flop = fit_parts(rows_, times_)[3]
    eta = 1.0 if per_flop <= 0 else min(1.0, max(0.01, 1.0 / (per_flop * peak)))
    coef = fit_parts(rows_, times_, fixed={3: 1.0 / (eta * peak)})  # the others beside the rate as held
    read = 2 * (KV_HEADS // 4) * KV_DIM * 4 / gather_bw / ATTN_HEADS  # a key's K and V at the gather rate, per query head
    return eta, coef[1], max(0.0, coef[2] - read)


# the fused call's rows probes (fused_rows): sequences verifying chains of each of these query
# rows (2-7: MTP's and EAGLE's chains and the grid's; up to the group call's most, 64), after
# each of two contexts; a rows' per-key part is their difference over the keys between. Two
# sizes: 8 sequences after 128 and 1,024 keys (1-8 MiB of K and V), 16 after 1,024 and 2,048
# (16-32 MiB). Torch's fused attention is not linear in the rows: 2026-12-06 (EPYC Zen 3, 4-8
# sequences, 256 against 1,024 keys) 3 rows read 76-84 ns a key and query head, 7 rows 83-86,
# 4 rows 57-59, 64 rows 337-387 (validation/results/cpu-epyc-zen3/0.50.0/fused_rows.txt); and 4
# rows 56-60 ns at 0.5-8 MiB of K and V, 71-105 at 8-48 MiB (fused_sizes.txt)
FUSED_ROWS = (2, 3, 4, 5, 6, 7, 8, 12, 16, 24, 32, 48, 64)
ROWS_SIZES = ((8, (128, 1024)), (16, (1024, 2048)))  # (sequences, (contexts))
# a sequence's call of its own (fused_own): one sequence verifying a chain of each rows up to the
# group call's most (a lone chain or tree), then prefilling a causal chunk of more (each after
# both contexts). 2026-12-06 (EPYC Zen 3) the family's one-sequence chains read -3% to -17% and
# its prefill chunks +6% to +15% priced on the group curve and fused_key_ns
# (validation/results/cpu-epyc-zen3/0.50.0/steptime-rows.txt)
OWN_ROWS = (2, 3, 4, 5, 6, 7, 8, 16, 32, 64, 128, 256, 512)
OWN_SIZES = ((1, (128, 1024)),)


def rows_key(seqs: int, rows: int, context: int) -> str:
    """A rows probe's figure name."""
    return f"rows{seqs}x{rows}c{context}"


def rows_probes(device: str, sizes=ROWS_SIZES, rows=FUSED_ROWS) -> dict:
    """{rows_key: call} of the fused_rows probes (fused_own's: OWN_SIZES, OWN_ROWS): at each of
    `sizes`, its sequences verifying chains of each of `rows` rows (prefilling causal chunks
    beyond GROUP_MAX) after each of its contexts (attention_probe's calls)."""
    return {rows_key(n, r, c): attention_probe(device, n, r, c, r <= GROUP_MAX)
            for n, contexts in sizes for r in rows for c in contexts}


def fused_rows_curve(t: dict, gather_bw: float, per_flop: float, sizes=ROWS_SIZES, rows=FUSED_ROWS) -> dict:
    """{MiB: [[rows, ns per key and query head], ...]} for `sizes` and `rows`
    (hardware.fused_rows; fused_own's from OWN_SIZES and OWN_ROWS) from the mean times `t` of
    rows_probes: each rows' time per key and query head between a size's two contexts, less
    reading the key at the gather rate `gather_bw` and less its products at `per_flop` seconds a
    FLOP (as the cost model prices them: 1 / (eta_attn x peak)); none below 0. A size is its
    sequences' K and V at the geometric mean of its two contexts."""
    key_bytes = 2 * (KV_HEADS // 4) * KV_DIM * 4  # a key's K and V, fp32
    read = key_bytes / gather_bw / ATTN_HEADS  # per query head
    out = {}
    for n, (lo, hi) in sizes:
        curve = []
        for r in rows:
            per_key = (t[rows_key(n, r, hi)] - t[rows_key(n, r, lo)]) / (ATTN_HEADS * n * (hi - lo))
            curve.append([r, round(float(max(0.0, per_key - read - r * 4 * KV_DIM * per_flop)) * 1e9, 2)])
        out[round(n * (lo * hi) ** 0.5 * key_bytes / 2**20, 2)] = curve
    return out


def fit_parts(rows: np.ndarray, times: np.ndarray, fixed: dict[int, float] | None = None) -> np.ndarray:
    """Non-negative parts x (the first, a fixed part, may take any sign) with rows @ x ~ times,
    by least squares on the relative error; `fixed` holds some parts at given values. A part
    that reads negative is set to 0 and the rest fitted again. rows (calls, parts), times (calls,)."""
    fixed = dict(fixed or {})
    while True:
        free = [j for j in range(rows.shape[1]) if j not in fixed]
        held = sum((rows[:, j] * v for j, v in fixed.items()), np.zeros(len(times)))
        w = 1.0 / times
        x, *_ = np.linalg.lstsq(rows[:, free] * w[:, None], (times - held) * w, rcond=None)
        out = np.zeros(rows.shape[1])
        out[free] = x
        for j, v in fixed.items():
            out[j] = v
        bad = [j for j in free if j and out[j] < 0]
        if not bad:
            return out
        fixed[min(bad, key=lambda j: out[j])] = 0.0


# tokens of the elementwise probe's sizes: the per-element time can grow with the size once the
# passes leave the caches (here, between a layer's products, 1.1-1.2 ns an element from 64 to
# 4,096 tokens of the family's layer in one calibration, 2.3 ns on average at 4,096 in another:
# a closed batch of 32 prompts prefills 4,096 tokens in one step).
# elementwise_ns is the EW_PAIR stretch (prefill chunks, batched trees); elementwise_sizes all
EW_TOKENS = (64, 256, 1024, 4096)
EW_PAIR = (256, 1024)
EW_SPEC = ModelSpec(name="elementwise-probe", layers=1, hidden=256, heads=4, kv_heads=2, head_dim=64, ffn=768,
                    vocab=256, bytes_per_weight=4, bytes_per_kv=4)  # the trained family's layer


def elementwise_probe(device: str, n: int):
    """One layer of EW_SPEC's shape over n tokens (fp32) as the engine's forward runs it, its
    weight products feeding its unfused elementwise passes: the two norms, rotary embedding of q
    and k and their layout copies, the gate's SiLU and product, the two residual adds (attention
    left out: the rotated queries stand in for its output). The call returns the seconds of the
    passes alone (each timed between its products), so they meet what a forward leaves them:
    operands the products just wrote, the inputs they read again evicted by the weights. Timed
    on their own instead (until 0.28.0), the same passes ran 0.6-0.7 ns an element from 64 to 256
    tokens back to back and 0.3 ns as the calibration interleaved the sizes, against 1.1-1.5 ns
    here, and the family's forward grew alike with this probe (each elementwise operation's own
    time in torch.profiler, 28 against 256 tokens: 0.15 -> 0.96 ms of products of the gate, 0.11
    -> 0.47 ms of adds; in this probe 0.14 -> 0.97 and 0.07 -> 0.40): the step-time grid's
    family passes of 64 tokens or more had read 8% short, its single tokens not. The extra time
    of EW_TOKENS' larger size per extra sim.cost.elementwise_elems element -> `elementwise_ns`
    (`elementwise_time`): each operation's fixed host time cancels, which the cost model already
    charges per layer (`launch_us`)."""
    from engine.model import NORM_EPS, ROPE_THETA, Rope
    from kernels import get_ops
    s = EW_SPEC
    ops = get_ops("torch" if device == "cpu" else "triton", check_values=False)
    sync = device_sync(device)
    rope = Rope(s.head_dim, ROPE_THETA, device)
    rope.ensure(n)
    g = torch.Generator(device=device).manual_seed(n)
    nq, nk = s.heads * s.head_dim, (s.heads + s.kv_heads) * s.head_dim

    def weight(rows: int, cols: int) -> torch.Tensor:
        return torch.randn(rows, cols, device=device, generator=g) / cols ** 0.5
    w_qkv, w_o = weight((s.heads + 2 * s.kv_heads) * s.head_dim, s.hidden), weight(s.hidden, nq)  # (nq + 2 nkv d, H), (H, nq)
    w_gu, w_down = weight(2 * s.ffn, s.hidden), weight(s.hidden, s.ffn)               # (2F, H), (H, F)
    x = torch.randn(n, s.hidden, device=device, generator=g)                         # (n, H)
    w = torch.ones(s.hidden, device=device)
    pos = torch.arange(n, device=device)

    def timed(f, *args):
        """f(*args) and its seconds, the work before it finished first."""
        sync()
        t = time.perf_counter()
        out = f(*args)
        sync()
        return out, time.perf_counter() - t

    def rotate(qkv):  # (n, (nh + 2 nkv) d) -> q (n, nh, d); k rotated and laid out too
        q = rope(qkv[:, :nq].view(n, s.heads, s.head_dim), pos).contiguous()
        rope(qkv[:, nq:nk].view(n, s.kv_heads, s.head_dim), pos).contiguous()
        return q

    def residual_norm(o):  # the residual add, then the FFN's norm
        y = x + o
        return y, ops.rms_norm(y, w, NORM_EPS)

    def run() -> float:
        h, t1 = timed(ops.rms_norm, x, w, NORM_EPS)                                   # (n, H)
        q, t2 = timed(rotate, h @ w_qkv.T)                                            # (n, nh, d)
        o = q.view(n, nq) @ w_o.T                                                     # (n, H)
        (y, h), t3 = timed(residual_norm, o)                                          # (n, H) each
        a, t4 = timed(lambda gu: torch.nn.functional.silu(gu[:, :s.ffn]) * gu[:, s.ffn:], h @ w_gu.T)  # (n, F)
        _, t5 = timed(torch.add, y, a @ w_down.T)
        return t1 + t2 + t3 + t4 + t5
    return run


def extra_per_unit(t_small: float, t_large: float, units: float) -> float:
    """A probe's extra time at its larger size per extra unit (element, node, candidate): the
    fixed cost both sizes share cancels; 0 if the larger was not slower."""
    return max(0.0, (t_large - t_small) / units)


def elementwise_time(t_small: float, t_large: float) -> float:
    """Seconds per activation element from elementwise_probe at EW_PAIR's two sizes (0 if not slower)."""
    from sim.cost import elementwise_elems
    small, large = EW_PAIR
    return extra_per_unit(t_small, t_large, (large - small) * elementwise_elems(EW_SPEC)[0])


def elementwise_curve(t: dict) -> list[list[float]]:
    """[[million elements, ns per element], ...] from elementwise_probe's mean times `t`
    ("ew{tokens}" for each of EW_TOKENS): a layer's passes over that many activation elements
    (sim.cost.elementwise_elems per token), their average time per element with each
    operation's fixed host time left out (average_per_unit; launch_us holds it)."""
    from sim.cost import elementwise_elems
    elems = [n * elementwise_elems(EW_SPEC)[0] for n in EW_TOKENS]
    per = average_per_unit(elems, [t[f"ew{n}"] for n in EW_TOKENS])
    return [[round(e / 1e6, 4), printed(x * 1e9)] for e, x in zip(elems, per)]

