"""The calibration's microbenchmarks (validation/calibrate.py says what each one measures and
which profile field it gives): each builder sets up its tensors or model once and returns the
call to time, so validation.calibrate.Calibration can run them round-robin, a few at a time."""
from __future__ import annotations

import statistics
import time
from pathlib import Path

import torch

from sim import trees as T
from sim.models import ModelSpec


def _timer(device: str):
    def sync():
        if device == "cuda":
            torch.cuda.synchronize()
    return sync


HOST_REFERENCE_ITERS = 5_000  # about 0.25 ms here


def host_reference(iters: int = HOST_REFERENCE_ITERS) -> int:
    """The host's speed reference, timed beside what it measures (validation.compare: after every
    engine step): interpreter work only, so it runs as fast after a call that swept the caches as
    after one that did not (right after a batch-16 forward over 2,048 keys a model's forward, or a
    small matmul loop, read 1.22-1.25x slower than usual; this loop 0.97x)."""
    s = 0
    for i in range(iters):
        s += i
    return s


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
    sync = _timer(device)
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


def steady_time(fn, device: str, tol: float = 0.03, least: int = 6, most: int = 12) -> float:
    """Seconds of one call of fn once repeating it stops making it faster: at least `least`
    calls, then until one is no more than `tol` faster than the one before (`most` at most), the
    mean of the last two. A pool of weights that fits the last-level cache takes five to eight
    passes to settle there after other work swept it, and its first passes can read alike before
    the times fall: after a write over 1.5x that cache, 64 MiB of 768 KiB matrices read 67, 66,
    55, 42, 35, 34 us a matrix per pass (1 row), and 16 MiB ones 1.2, 1.2, 0.98, 0.75, 0.69,
    0.66 ms; at 4 rows, where the products' compute dominates, the first pass already reads
    within 2% of the third."""
    sync = _timer(device)
    times: list[float] = []
    while len(times) < max(2, least, most):
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
        if len(times) >= max(2, least) and times[-1] >= (1.0 - tol) * times[-2]:
            break
    return (times[-1] + times[-2]) / 2


def interleaved_times(fns: dict, device: str, calls: int) -> dict:
    """{name: mean seconds per call} of `calls` calls of each of `fns`, the calls interleaved one
    by one (fn a, fn b, fn a, ...): a calibration figure that is a difference of two probes (per
    layer: 6 layers against 1) would otherwise take them seconds apart, and this host's speed
    changes within seconds (per-layer figures read 60 to 110 us between calibrations). One
    untimed round first: the first call after a probe that swept the caches reads slower."""
    sync = _timer(device)
    for fn in fns.values():
        fn()
    total = dict.fromkeys(fns, 0.0)
    for _ in range(max(1, calls)):
        for name, fn in fns.items():
            sync()
            t0 = time.perf_counter()
            fn()
            sync()
            total[name] += time.perf_counter() - t0
    return {name: t / max(1, calls) for name, t in total.items()}


def matmul_probes(device: str, sizes, rows, pool_bytes: int = 64 << 20) -> dict:
    """{(weight KiB, M): (call, FLOPs of one call)}: `x @ W.T` (x: (M, k), W: (n, k)) over
    distinct matrices filling `pool_bytes` (one at least), as a forward pass meets each weight
    once (a matrix multiplied again straight away sits in L2 and runs up to 4x faster)."""
    out = {}
    for k, n in sizes:
        ws = [torch.randn(n, k, device=device) for _ in range(max(1, pool_bytes // (4 * k * n)))]
        for m in rows:
            x = torch.randn(m, k, device=device)
            out[(k * n * 4 // 1024, m)] = (lambda x=x, ws=ws: [x @ w.T for w in ws], 2 * m * k * n * len(ws))
    return out


def last_level_cache_bytes(cpu: Path = Path("/sys/devices/system/cpu/cpu0/cache")) -> int:
    """The bytes of this CPU's last-level cache (the highest level sysfs lists for cpu0: here the
    300 MiB L3), 0 where the system does not say."""
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


def kv_gather_bytes(seqs: int = KV_SEQS, context: int = KV_CONTEXT, kv_heads: int = KV_HEADS) -> int:
    """Bytes of K and V (fp32) that kv_gather_probe reads a call."""
    return 2 * seqs * context * kv_heads * KV_DIM * 4


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
    per_byte = average_per_unit(sizes, [t[kv_key(prefix, *size)] for size in KV_SIZES])
    return [[b / 2**20, printed(min(1.0, 1.0 / (x * stream_bw)))] for b, x in zip(sizes, per_byte)]


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


ATTN_SEQS, ATTN_HEADS, ATTN_FEW, ATTN_MANY = 16, 4, 8, 64  # 16 sequences: the concurrency the comparisons reach
ATTN_CONTEXTS = (128, 1024)  # the attention probes' two contexts (attention_figures)


def attention_probe(device: str, queries: int, context: int):
    """The engine's paged attention verifying a chain of `queries` tokens (a root and its
    queries - 1 drafts, ancestor masks and all) in each of ATTN_SEQS sequences after `context`
    keys (ATTN_HEADS query heads on KV_HEADS // 4 KV heads of KV_DIM, the trained family's
    shape; fp32): the padded fused path a batch of chains or trees takes."""
    return _paged_attention_call(device, ATTN_SEQS, context, queries, ATTN_HEADS, KV_HEADS // 4, drafts=True)


def _paged_attention_call(device: str, seqs: int, context: int, queries: int, heads: int, kv_heads: int,
                          drafts: bool = False):
    """A call of the engine's paged attention (unchecked): `seqs` sequences each with `queries`
    query tokens after `context` keys, `heads` query heads on `kv_heads` KV heads of KV_DIM
    (fp32, random). drafts: the queries are a root and a chain of drafts behind it (as a
    verification lays them out: a tree start and ancestor masks), else causal tokens."""
    from kernels import get_ops
    from kernels.attention import NO_TREE, ancestor_masks
    per = context + queries
    k = torch.randn(seqs * per, kv_heads, KV_DIM, device=device)
    v = torch.randn(seqs * per, kv_heads, KV_DIM, device=device)
    q = torch.randn(seqs * queries, heads, KV_DIM, device=device)
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
    ops = get_ops("torch" if device == "cpu" else "triton", check_values=False)
    return lambda: ops.paged_attention(q, k, v, kv_slots, lens, qs, qp, ts, anc, 0.125)


def attention_figures(t: dict, gather_bw: float, peak: float) -> tuple[float, float, float]:
    """(eta_attn, fused_query_s, fused_key_s) from attention_probe's mean times `t`
    ("attn{queries}c{context}") with ATTN_FEW and ATTN_MANY queries per sequence at both
    ATTN_CONTEXTS. A call is taken to cost a fixed part plus, per sequence, a part per query, a
    part per key it gathers and a part per product (each query against all its sequence's
    gathered keys, as the reference computes them): the four calls give the last three. The part
    per product, against its FLOPs (4 x heads x head_dim), -> eta_attn as a fraction of the GEMM
    peak; the part per query, per query head -> fused_query_s (the padded call scatters each
    query's rows, mask row and output, and walks its ancestor bits); the part per key beyond its
    reading at the KV gather rate `gather_bw` (which decoding sequences pay), per query head ->
    fused_key_s (the padded call's transposed copies and its masked per-key work). Measured
    here: 0.6-1.0 us a query head; a fit to the family's in-forward attention timings read 1.3."""
    short, long_ = ATTN_CONTEXTS
    few, many, S, H = ATTN_FEW, ATTN_MANY, ATTN_SEQS, ATTN_HEADS

    def rect(q, c):  # products a sequence: its queries x its gathered keys
        return q * (c + q)

    a = (t[f"attn{many}c{short}"] - t[f"attn{few}c{short}"]) / S
    b = (t[f"attn{many}c{long_}"] - t[f"attn{few}c{long_}"]) / S
    c = (t[f"attn{few}c{long_}"] - t[f"attn{few}c{short}"]) / S
    per_product = (b - a) / ((many - few) * (long_ - short))
    flops = 4 * H * KV_DIM
    eta = 1.0 if per_product <= 0 else min(1.0, max(0.01, flops / per_product / peak))
    per_product = flops / (eta * peak)
    per_key = c / (long_ - short) - per_product * few
    per_query = (a - per_product * (rect(many, short) - rect(few, short))) / (many - few) - per_key
    read = 2 * (KV_HEADS // 4) * KV_DIM * 4 / gather_bw
    return eta, max(0.0, per_query) / H, max(0.0, per_key - read) / H


# tokens of the elementwise probe's sizes: the per-element time grows with the size once the
# passes leave the L2 cache (here 0.9 ns an element from 64 to 1,024 tokens of the family's layer,
# 1.2 ns from 1,024 to 4,096: a closed batch of 32 prompts prefills 4,096 tokens in one step).
# elementwise_ns is the EW_PAIR stretch (prefill chunks, batched trees); elementwise_sizes all
EW_TOKENS = (64, 256, 1024, 4096)
EW_PAIR = (256, 1024)
EW_SPEC = ModelSpec(name="elementwise-probe", layers=1, hidden=256, heads=4, kv_heads=2, head_dim=64, ffn=768,
                    vocab=256, bytes_per_weight=4, bytes_per_kv=4)  # the trained family's layer


def elementwise_probe(device: str, n: int):
    """One layer's elementwise passes as the engine's forward runs them, over n tokens of
    EW_SPEC's shape (fp32): the two norms, rotary embedding of q and k and their layout copies,
    the gate's SiLU and product, the two residual adds; matmuls and attention left out. The extra
    time of EW_TOKENS' larger size per extra sim.cost.elementwise_elems element ->
    `elementwise_ns` (`elementwise_time`): each operation's fixed host time cancels, which the
    cost model already charges per layer (`launch_us`; it was about 0.22 ms of the 256-token
    call's 0.9 ms here, charged twice while the figure was that call's time per element)."""
    from engine.model import NORM_EPS, ROPE_THETA, Rope
    from kernels import get_ops
    s = EW_SPEC
    ops = get_ops("torch" if device == "cpu" else "triton", check_values=False)
    rope = Rope(s.head_dim, ROPE_THETA, device)
    x = torch.randn(n, s.hidden, device=device)                                       # (n, H)
    w = torch.ones(s.hidden, device=device)
    qkv = torch.randn(n, (s.heads + 2 * s.kv_heads) * s.head_dim, device=device)      # (n, (nh + 2 nkv) d)
    gu = torch.randn(n, 2 * s.ffn, device=device)                                     # (n, 2F)
    pos = torch.arange(n, device=device)
    nq, nk = s.heads * s.head_dim, (s.heads + s.kv_heads) * s.head_dim

    def run():
        h = ops.rms_norm(x, w, NORM_EPS)
        q = rope(qkv[:, :nq].view(n, s.heads, s.head_dim), pos).contiguous()
        k = rope(qkv[:, nq:nk].view(n, s.kv_heads, s.head_dim), pos).contiguous()
        y = x + h
        h = ops.rms_norm(y, w, NORM_EPS)
        a = torch.nn.functional.silu(gu[:, :s.ffn]) * gu[:, s.ffn:]
        return y + h, q, k, a
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


LOGIT_SEQS, LOGIT_NODES, LOGIT_VOCABS = 4, 31, (1024, 8192)


def logit_probe(device: str, vocab: int):
    """The engine's greedy verification of one group of LOGIT_SEQS sequences, each a binary tree
    of LOGIT_NODES drafted nodes, over a vocabulary of `vocab` (fp32 logits): the rows stacked
    out of the forward's logits, then engine.verify.verify_tree_greedy, as the runner does. The
    difference between LOGIT_VOCABS' two vocabularies over the extra logit elements ->
    `logit_ns` (the tree walk's fixed cost cancels)."""
    from engine.runner import group_rows
    from engine.verify import verify_tree_greedy
    rows = LOGIT_NODES + 1
    logits = torch.randn(LOGIT_SEQS * rows, vocab, device=device)                     # (B (T+1), V)
    drafts = torch.randint(0, vocab, (LOGIT_SEQS, LOGIT_NODES), device=device)         # (B, T)
    parents = [(i - 1) // 2 for i in range(LOGIT_NODES)]

    starts = [b * rows for b in range(LOGIT_SEQS)]

    def run():
        group = group_rows(logits, starts, rows)  # (B, T+1, V)
        return verify_tree_greedy(group, drafts, parents)
    return run


def logit_time(t_small: float, t_large: float) -> float:
    """Seconds per logit element from logit_probe at LOGIT_VOCABS' two sizes (0 if not slower)."""
    small, large = LOGIT_VOCABS
    return extra_per_unit(t_small, t_large, LOGIT_SEQS * (LOGIT_NODES + 1) * (large - small))


DRAFT_LOGIT_ROWS = 32  # LM-head rows of the drafter-selection probe (EAGLE-2 at top-8, 4 sequences: one pass)


def draft_logit_probe(device: str, vocab: int):
    """What the engine's drafters do with their LM-head rows, as EAGLE-2's (engine/drafting/eagle.py
    `children`) does over one pass of DRAFT_LOGIT_ROWS rows of `vocab` fp32 logits: the softmax, the
    top candidates (drafting.base.RANKS), their ids and probabilities back as lists. At
    LOGIT_VOCABS' two sizes the extra time per extra element -> `draft_logit_ns` (a softmax and a
    top-k read each element more slowly than verification's argmax: 4.5-5.2 against 2.5-2.9 ns
    here)."""
    from engine.drafting.base import RANKS
    logits = torch.randn(DRAFT_LOGIT_ROWS, vocab, device=device)  # (P, V)

    def run():
        top = torch.softmax(logits, -1).topk(RANKS)
        return top.indices.tolist(), top.values.tolist()
    return run


def draft_logit_time(t_small: float, t_large: float) -> float:
    """Seconds per logit element from draft_logit_probe at LOGIT_VOCABS' two sizes (0 if not slower)."""
    small, large = LOGIT_VOCABS
    return extra_per_unit(t_small, t_large, DRAFT_LOGIT_ROWS * (large - small))


DRAFT_TREE_SEQS, DRAFT_TREE_DEPTH, DRAFT_TREE_TOPK = 4, 6, (2, 8)  # the tree-bookkeeping probe's shape


def draft_tree_candidates(k: int, depth: int) -> int:
    """Candidates an EAGLE-2 drafter scores for one sequence: the root's top-k, then k x k at each
    further depth (the k most confident frontier nodes' top-k children)."""
    return k + (depth - 1) * k * k


def draft_tree_probe(device: str, k: int):
    """EAGLE-2's tree bookkeeping as the engine runs it (engine.drafting.eagle.grow_dynamic: the
    children's softmax and top-k, each candidate recorded, the frontier and the kept tree chosen by
    confidence) for DRAFT_TREE_SEQS sequences at depth DRAFT_TREE_DEPTH and top-`k`, over a
    64-token vocabulary, its `expand` storing random logits for the expanded nodes instead of
    running the head. At DRAFT_TREE_TOPK's two k the extra time per extra candidate ->
    `draft_cand_us` (`draft_cand_time`)."""
    from engine.drafting.eagle import Grow, grow_dynamic
    rows = torch.randn(1 + k, VERIFY_VOCAB, device=device)  # (1 + k, V) the root's, then the expanded nodes'
    feat = torch.zeros(8, device=device)
    keep = draft_tree_candidates(k, DRAFT_TREE_DEPTH) // 2

    def run():
        grows = [Grow(feat, rows[0]) for _ in range(DRAFT_TREE_SEQS)]

        def expand(todo: dict) -> None:
            for b, nodes in todo.items():
                for i, nid in enumerate(nodes):
                    grows[b].feat[nid], grows[b].logits[nid] = feat, rows[1 + i]
        return grow_dynamic(grows, [DRAFT_TREE_DEPTH] * DRAFT_TREE_SEQS, k, keep, expand)
    return run


def draft_cand_time(t_small: float, t_large: float) -> float:
    """Seconds per candidate from draft_tree_probe at DRAFT_TREE_TOPK's two k (0 if not slower)."""
    small, large = (draft_tree_candidates(k, DRAFT_TREE_DEPTH) for k in DRAFT_TREE_TOPK)
    return extra_per_unit(t_small, t_large, DRAFT_TREE_SEQS * (large - small))


VERIFY_SEQS = 4  # sequences of the verify host-time probe
VERIFY_VOCAB = 64  # the verification host probe's vocabulary: its logits cost next to nothing
VERIFY_TREES = (8, 62)  # nodes of its two trees (the extra nodes' time -> tree_node_us)


def _binary_tree(n: int) -> tuple[int, ...]:
    return tuple((i - 1) // 2 for i in range(n))


def verify_host_probe(device: str) -> dict:
    """Callables that time the engine's host work around a pass beyond the logits, as the
    runner (engine/runner.py `_forward_verify`) does it at temperature 0:
    - `vchain`: one verification call, one sequence's 1-node chain (its rows out of the logits,
      the drafts as a tensor, engine.verify's chain routine, the results back as lists);
    - `vtree8`, `vtree62` (VERIFY_TREES): the same call for one sequence's binary tree of 8 and
      62 nodes (the tree routine, which walks the tree's ancestor table);
    - `pack0`, `pack62`: engine.model.StepBatch.pack of VERIFY_SEQS sequences decoding, and each
      with a 62-node tree (query, slot and tree-mask rows).
    Their differences -> verify_call_us, tree_call_us, tree_node_us, pack_node_us (calibrate)."""
    from engine.model import SeqQuery, StepBatch
    from engine.runner import group_rows
    from engine.verify import verify_chain_greedy, verify_tree_greedy

    def call(parents: tuple):
        t = len(parents)
        logits = torch.randn(t + 1, VERIFY_VOCAB, device=device)  # (T+1, V)
        drafts = [list(range(t))]

        def run():
            rows = group_rows(logits, [0], t + 1)  # (1, T+1, V)
            d = torch.tensor(drafts, dtype=torch.int64, device=device).view(1, t)
            if T.is_chain(parents):
                toks, num = verify_chain_greedy(rows, d)
                path = None
            else:
                toks, num, path = verify_tree_greedy(rows, d, list(parents))
            toks.tolist(), num.tolist(), path.tolist() if path is not None else None
        return run

    def pack(nodes: int):
        ctx, tree = 160, _binary_tree(nodes)
        seqs = [SeqQuery(tokens=[1], ctx=ctx, index=torch.arange(b * 400, b * 400 + ctx + 1), nodes=[2] * nodes,
                         parents=tree, spec_slots=list(range(b * 400 + ctx + 1, b * 400 + ctx + 1 + nodes)))
                for b in range(VERIFY_SEQS)]
        return lambda: StepBatch.pack(seqs, device)
    small, large = VERIFY_TREES
    return {"vchain": call((-1,)), f"vtree{small}": call(_binary_tree(small)), f"vtree{large}": call(_binary_tree(large)),
            "pack0": pack(0), f"pack{large}": pack(large)}


def verify_host_figures(t: dict, logit_s: float) -> dict:
    """verify_call_s, tree_call_s, tree_node_s, pack_node_s from verify_host_probe's mean times
    (its calls' few logits, at `logit_s` per element, taken off)."""
    small, large = VERIFY_TREES
    call = {k: t[k] - logit_s * n * VERIFY_VOCAB for k, n in (("vchain", 2), (f"vtree{small}", small + 1),
                                                               (f"vtree{large}", large + 1))}
    node = extra_per_unit(call[f"vtree{small}"], call[f"vtree{large}"], large - small)
    return {"verify_call_s": max(0.0, call["vchain"]), "tree_node_s": node,
            "tree_call_s": max(0.0, call[f"vtree{small}"] - small * node - call["vchain"]),
            "pack_node_s": extra_per_unit(t["pack0"], t[f"pack{large}"], VERIFY_SEQS * large)}


HOST_SPEC = ModelSpec(name="probe", layers=1, hidden=64, heads=4, kv_heads=2, head_dim=16, ffn=128,
                      vocab=256, bytes_per_weight=4, bytes_per_kv=4)  # the host-time probes' model


def forward_probe(layers: int, device: str, nodes: int = 0, seqs: int = 1, check: bool = True, plain: int = 0,
                  shape: ModelSpec = HOST_SPEC):
    """A bare forward call of a random model of `shape` (HOST_SPEC, hidden 64, by default) with
    `layers` layers, `seqs` sequences each with one decode token (and a chain of `nodes` drafted
    tokens to verify, but for the last `plain` of them) over 8 keys: at HOST_SPEC's size compute
    and bandwidth are negligible, so its time is host time. check: the model checks the step's
    index tensors, as the engine's target does (its drafters do not)."""
    from dataclasses import replace

    from engine.kv_cache import KVCache
    from engine.model import Model, SeqQuery, StepBatch
    model = Model.random(replace(shape, layers=layers), seed=0, device=device, check_values=check)
    cache = KVCache(model.spec, seqs, 16, device)
    def query(b: int) -> SeqQuery:
        k = nodes if b < seqs - plain else 0
        return SeqQuery(tokens=[1], ctx=8, index=list(range(16 * b, 16 * b + 9)), nodes=[2] * k,
                        parents=tuple(range(-1, k - 1)), spec_slots=list(range(16 * b + 9, 16 * b + 9 + k)))

    step = StepBatch.pack([query(b) for b in range(seqs)])
    return lambda: model.forward(step, cache)


def layer_probes(layers: int, device: str) -> dict:
    """A bare decode forward of a random model with `layers` layers of the trained family's shape
    (EW_SPEC): `layer{layers}`. Its growth per layer, less what the cost model charges for the
    layer's weight products (`layer_time`), is the host time of a real-sized layer: measured here,
    130-250 us a layer more than a HOST_SPEC layer."""
    return {f"layer{layers}": forward_probe(layers, device, shape=EW_SPEC)}


def layer_products_time(gemm_rows: dict, peak: float, stream_bw: float, layers: int,
                        warm: dict | None = None, cache_bytes: float = 0) -> float:
    """What the cost model charges for one EW_SPEC layer's weight products at one row, in a model
    of `layers` such layers (the layer probes'), on the measured matmul curves (`gemm_rows`, and
    `warm` where that model's weights fit `cache_bytes` of last-level cache: {KiB: [[rows,
    fraction], ...]}) and streaming rate: the larger of their compute and their weights'
    streaming time. Taking off the price, not the products as timed beside the probe, keeps a
    step of the family's shape right (its host time plus the priced products is the layer as
    timed)."""
    from dataclasses import replace

    from sim.cost import ForwardCost
    from sim.hardware import hardware_from_node
    from sim.specio import Node
    profile = {"preset": "cpu", "tflops": {"fp32": peak / 1e12}, "memory_tb_s": stream_bw / 1e12,
               "eta_compute": 1.0, "eta_memory": 1.0, "launch_us": 0.0}
    if gemm_rows:  # the profile's own form, {KiB: [[rows, fraction], ...]}
        profile["gemm_rows"] = gemm_rows
        if warm:
            profile |= {"gemm_rows_warm": warm, "cache_mb": cache_bytes / 2**20}
    hw = hardware_from_node(Node(profile, None, "hardware"), Path(".")).for_weights(replace(EW_SPEC, layers=layers).weight_bytes)
    cost = ForwardCost(replace(EW_SPEC, layers=1), hw, lm_head=False)
    _, _, _, compute, memory = cost._token_part(1, 0)
    return max(compute, memory)


def layer_time(t: dict, deep: int, products_s: float) -> float:
    """A real-sized layer's host time from layer_probes at 1 and `deep` layers (their mean
    times): the forwards' difference per layer, less `products_s`, the cost model's price of
    the layer's products (layer_products_time); never negative."""
    return max(0.0, extra_per_unit(t["layer1"], t[f"layer{deep}"], deep - 1) - products_s)


def engine_step(batch: int, device: str, scheme: str = "none") -> float:
    """Mean decode-step duration of the engine (its own clock) on a 1-layer tiny random model,
    `batch` sequences decoding 48 tokens each after a 16-token prompt, with `scheme` (mtp: one
    module drafting one token per step)."""
    entry = {"scheme": scheme} | ({"depth": 1} if scheme == "mtp" else {})
    return float(statistics.mean(_decode_steps(batch, device, entry, 48)["duration"]))


DRAFT_PASS_DEPTHS, DRAFT_PASS_SEQS = (1, 5), (1, 16)


# a static tree as deep as the deep chain, expanding 2, 3, 4 and 2 nodes at its levels 1-4
DRAFT_NODE_PROBS, DRAFT_NODE_NODES = [[0.7, 0.2]] * DRAFT_PASS_DEPTHS[1], 16


def draft_pass_probe(device: str) -> dict:
    """The engine's EAGLE drafter (a random head on engine_step's model) drafting chains of
    DRAFT_PASS_DEPTHS' depths (1 pass a step, and 5: the root pass and 4 more) for
    DRAFT_PASS_SEQS' sequences: {"dpass{depth}b{seqs}": mean drafting time of a decode step (the
    engine times its planner's call)}; and the greedy static tree of DRAFT_NODE_NODES nodes for
    DRAFT_NODE_PROBS, as deep as the deep chain, for the most sequences: "dnode"
    (draft_node_time). Random drafts are rejected, so every step drafts the whole chain or tree
    (draft_pass_time)."""
    out = {f"dpass{d}b{b}": float(statistics.mean(_decode_steps(b, device, {"scheme": "eagle", "depth": d}, 24)["draft_time"]))
           for d in DRAFT_PASS_DEPTHS for b in DRAFT_PASS_SEQS}
    tree = {"scheme": "eagle", "depth": DRAFT_PASS_DEPTHS[1], "tree": DRAFT_NODE_NODES,
            "acceptance": {"rank_depth": DRAFT_NODE_PROBS}}
    out["dnode"] = float(statistics.mean(_decode_steps(DRAFT_PASS_SEQS[1], device, tree, 24)["draft_time"]))
    return out


def draft_pass_time(t: dict) -> float:
    """Host time per sequence of each drafter pass after a step's first, from draft_pass_probe's
    times: the growth per sequence of the deep chain's drafting beyond the one-pass chain's,
    per extra pass (never negative). Here 30-49 us, against 40-50 us a sequence for the first
    pass and 92-123 us that a speculative step grows by per sequence (draft_seq_us)."""
    (d0, d1), (b0, b1) = DRAFT_PASS_DEPTHS, DRAFT_PASS_SEQS
    grow = (t[f"dpass{d1}b{b1}"] - t[f"dpass{d1}b{b0}"]) - (t[f"dpass{d0}b{b1}"] - t[f"dpass{d0}b{b0}"])
    return max(0.0, grow / (b1 - b0) / (d1 - d0))


def draft_node_rows() -> int:
    """Rows of draft_pass_probe's static tree's later passes beyond one per sequence a pass, per
    sequence: the nodes each level expands, less one (its levels 1-4 expand 2, 3, 4, 2: 7)."""
    from sim import trees as T
    depth = DRAFT_PASS_DEPTHS[1]
    levels = T.expanding(T.greedy_static_tree(DRAFT_NODE_PROBS, DRAFT_NODE_NODES, depth), depth)
    assert all(levels), "the probe's tree must expand a node at every level, as the chain does"
    return sum(e - 1 for e in levels)


def draft_node_time(t: dict) -> float:
    """Host time per further node a drafter pass expands (a tree level's rows beyond one per
    sequence), from draft_pass_probe's times: the static tree's drafting beyond the chain's of the
    same depth and sequences, per such row (never negative). The tiny model's products and
    logits for those rows are a few percent of it. 17 us on a Xeon VM (2026-12-01), where the
    deep chain's later passes cost 28 us a sequence (draft_pass_seq_us); 52 us (and 106 us) on
    the third VM's, four times slower (validation/results/cpu-epyc-8m)."""
    b = DRAFT_PASS_SEQS[1]
    return max(0.0, (t["dnode"] - t[f"dpass{DRAFT_PASS_DEPTHS[1]}b{b}"]) / (b * draft_node_rows()))


def _decode_steps(batch: int, device: str, entry: dict, tokens: int) -> dict:
    """The step columns (numpy arrays) of the decode steps with every sequence in them, of the
    engine on a 1-layer tiny random model (hidden 64), `batch` sequences decoding `tokens` tokens
    each after a 16-token prompt with the speculation `entry`."""
    import tempfile

    import yaml

    from engine.checkpoint import resolve
    from engine.runner import run_scheme
    from sim.spec import load_trace
    from sim.workload import make_requests
    doc = {"version": 1, "name": "calibrate-step", "seed": 1, "hardware": "cpu", "model": "tiny",
           "serving": {"max_num_seqs": batch, "max_num_batched_tokens": 4096, "page_size": 16,
                       "kv_pages": 64 * batch, "paging": "indexshare"},
           "workload": {"requests": batch, "arrival": {"process": "closed", "concurrency": batch},
                        "prompt_tokens": {"dist": "fixed", "value": 16},
                        "output_tokens": {"dist": "fixed", "value": tokens}},
           "speculation": [entry],
           "engine": {"checkpoint": {"random_shape": "tiny", "layers": 1, "hidden": 64, "heads": 4, "kv_heads": 2,
                                     "head_dim": 16, "ffn": 128, "vocab": 256}, "device": device}}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t.yaml"
        path.write_text(yaml.safe_dump(doc))
        trace = load_trace(path)
    source = resolve(trace)
    model = source.build()
    res = run_scheme(trace, trace.speculation[0], make_requests(trace.workload, trace.seed), model,
                     drafters=source.drafters(model) if entry["scheme"] != "none" else None)
    cols = res.result.steps.columns()
    keep = (cols["batch_size"] == batch) & (cols["prefill_tokens"] == 0)
    return {k: v[keep] for k, v in cols.items()}


def allocator_op() -> float:
    from sim.kv import KVAllocator
    kv = KVAllocator(4096, 16, "indexshare")
    t0 = time.perf_counter()
    for i in range(2000):
        kv.grow(i, 16)  # one page each
        kv.release(i)
    return (time.perf_counter() - t0) / 4000


SPEED_WINDOW_S = 2.0  # one call of the speed probe: a contiguous timing this long
SPEED_BLOCK_S = 0.1  # cut into blocks this long


def speed_probe(device: str, window_s: float = SPEED_WINDOW_S, block_s: float = SPEED_BLOCK_S):
    """The host's speed over a short window: a 1-layer forward (forward_probe) called back to back
    for `window_s`, the rate of each `block_s` block (calls over their summed time), as (the
    window's start in seconds on the monotonic clock, [block rates]); sim.speed.spread_of and
    drift_of turn the windows of a calibration into speed_rates, speed_spell_s (within windows)
    and speed_drift_rates, speed_drift_s (between them)."""
    fn, sync = forward_probe(1, device), _timer(device)

    def call() -> tuple[float, list[float]]:
        rates, n, busy = [], 0, 0.0
        sync()
        start = block = time.perf_counter()
        while True:
            t0 = time.perf_counter()
            fn()
            sync()
            t1 = time.perf_counter()
            n, busy = n + 1, busy + (t1 - t0)
            if t1 - block >= block_s:
                rates.append(n / busy)
                n, busy, block = 0, 0.0, t1
                if t1 - start >= window_s:
                    return start, rates
    return call
