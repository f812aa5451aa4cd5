"""Roofline step cost (DESIGN.md §3): each operation costs max(FLOPs / (peak·η_c), bytes / (BW·η_m))
plus its launches (attention computes at η_attn of the compute rate; on a profile with
`attn_dense`, the CPU reference, it costs the sum of the two roofs, since it gathers the paged
keys first and then computes, and its products cover each sequence's queries x gathered keys;
where it measured `fused_query_us` and `fused_key_ns`, each query token of a sequence with several
(verifying drafts, or a prefill chunk) and each key such a sequence attends to add theirs per
query head (per key, by the sequence's query rows where it measured `fused_rows`); where a profile measured `elementwise_ns`, a layer's unfused
elementwise passes add their time per activation element, and where it measured `logit_ns`,
the sampling or verification after a pass its time per logit element, LM-head rows x vocab;
where the warm matmul curves price a model whose weights fit the last-level cache, its memory
roof counts no weight bytes, which those curves were timed reading from that cache); a step
sums its layers, the LM head, tensor-parallel all-reduces, host overhead, allocator operations
and KV copies.

Every function takes per-step aggregates that may be Python numbers or numpy arrays of shape
(steps,), so one call prices a single step or a run of k steps with the same arithmetic.
"""
from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

import numpy as np

from sim.hardware import HardwareSpec
from sim.models import ModelSpec
from sim.trees import is_chain

ACT_BYTES = 2  # activations travel in bf16 on GPUs; the CPU profile overrides nothing here (fp32 is ~2x: calibrated into η_m)
LOGIT_BYTES = 4  # fp32 logits written per sampled position
KERNELS_PER_LAYER = 10  # norm, qkv, rope, kv-store, attention, o-proj, norm, gate-up, act, down
LM_HEAD_KERNELS = 2  # the final norm and the LM head's product, beyond the embedding gather


class Work(NamedTuple):
    """What one forward pass over a batch does; fields are scalars or arrays over steps."""

    tokens: object  # query tokens through the layers (prefill chunks + decode + draft/verify nodes)
    seqs: object  # sequences in the batch
    pairs: object  # attended (query, key) pairs: Σ over queries of the keys each one sees
    kv_read: object  # KV tokens read: Σ over sequences of prior context + new tokens
    lm_tokens: object  # positions whose logits are computed
    mixed: object = 0  # 1 where some sequences have one query token and others several (else 0)
    # the sequences with several query tokens (verifying drafts, or prefill chunks): Σ over them
    # of query tokens + drafted nodes (hardware.fused_query_s); and of the keys they attend to,
    # context + query tokens + drafted nodes (hardware.fused_key_s). Before 0.23.0 verify_tokens
    # and verify_kv, over the sequences verifying drafts only
    multi_tokens: object = 0
    multi_kv: object = 0
    multi_seqs: object = 0  # how many such sequences (their mean query rows: hardware.fused_rows)
    # of those, the ones the engine attends in a call of their own (several_rows): Σ query tokens +
    # drafted nodes, Σ keys, how many (hardware.fused_own); the rest share padded group calls
    own_tokens: object = 0
    own_kv: object = 0
    own_seqs: object = 0
    # keys the CPU reference's attention gathers beyond each sequence's own (hardware.attn_dense;
    # kernels/attention.py): its group call takes every sequence up to the group's longest, and
    # its decoding sequences' call up to the longest of them: Σ over the group's sequences of
    # (the longest one's keys - their own), and over the decoding sequences the same
    group_pad: object = 0
    decode_pad: object = 0


GROUP_MAX = 64  # kernels/attention.py's group_max: most query rows a sequence takes into a group call


def several_rows(seqs, model=None) -> dict:
    """Work.multi_*, own_* and the padding (group_pad, decode_pad) of the sequences `seqs`
    [(query rows, keys)], as the engine's attention lays them out (kernels/attention.py): a
    sequence of more than GROUP_MAX rows (a prefill chunk) takes a call of its own, and so does
    the only one of 2 to GROUP_MAX; two or more of those share a group call, which gathers each
    one's keys up to the longest's; the decoding sequences (one row) share a call likewise. Given
    the `model`, those calls are split as the reference splits them (call_seqs), each padded to
    its own longest; without it, one call each."""
    seqs = list(seqs)
    longest = max((k for _, k in seqs), default=0)  # the batch's row of slots (engine.model's kv_slots width)
    dec = [k for r, k in seqs if r == 1]
    seqs = [(r, k) for r, k in seqs if r > 1]
    grouped = [(r, k) for r, k in seqs if r <= GROUP_MAX]
    own = [(r, k) for r, k in seqs if r > GROUP_MAX] + (grouped if len(grouped) == 1 else [])
    group = grouped if len(grouped) > 1 else []
    return {"multi_tokens": sum(r for r, _ in seqs), "multi_kv": sum(k for _, k in seqs), "multi_seqs": len(seqs),
            "own_tokens": sum(r for r, _ in own), "own_kv": sum(k for _, k in own), "own_seqs": len(own),
            "group_pad": pad_of([k for _, k in group], call_seqs(model, longest, max((r for r, _ in group), default=1))),
            "decode_pad": pad_of(dec, call_seqs(model, longest, 1))}


GATHER_FLOATS = 1 << 22  # kernels/attention.py's max_elems: the gathered K/V and scores a reference call holds


def call_seqs(model, longest: int, rows: int, floats: int = GATHER_FLOATS) -> int:
    """Sequences one call of the CPU reference's attention takes (kernels/attention.py), each of
    `rows` query rows over the batch's `longest` row of key slots: its gathered K and V
    (2 kv_heads head_dim floats a key) and scores (heads a key and row) at most `floats`
    (the reference's bound), at least one sequence; 0 (one call for all) without a `model`.
    On the family's shape (hidden 256) 32 decoding sequences of 500 keys share a call; on
    Llama-8B's, one sequence of 2,000 keys takes a call of its own, so no padding."""
    if model is None:
        return 0
    per_seq = longest * (2 * model.kv_heads * model.head_dim + model.heads * rows)
    return max(1, floats // max(1, per_seq))


def pad_of(keys: list, per_call: int = 0) -> int:
    """Keys the calls gather beyond each sequence's own when each takes its sequences up to its
    longest: `per_call` consecutive sequences a call (call_seqs), or all in one (0)."""
    if per_call and per_call < len(keys):
        return sum(pad_of(keys[i:i + per_call]) for i in range(0, len(keys), per_call))
    return len(keys) * max(keys) - sum(keys) if keys else 0


def alike_rows(tokens, kv, seqs) -> dict:
    """several_rows for `seqs` sequences alike (`tokens` query rows and `kv` keys in all, both
    0 where none has several): all in calls of their own when one, or more than GROUP_MAX rows
    each; else all in group calls."""
    own = 0 < seqs and (seqs == 1 or tokens > GROUP_MAX * seqs)
    return {"multi_tokens": tokens, "multi_kv": kv, "multi_seqs": seqs,
            "own_tokens": tokens if own else 0, "own_kv": kv if own else 0, "own_seqs": seqs if own else 0}


class Cost(NamedTuple):
    time: object  # seconds
    flops: object
    bytes: object
    compute_time: object  # Σ of the compute roof over operations
    memory_time: object  # Σ of the memory roof over operations


def compute_dtype(model: ModelSpec) -> str:
    """fp8 weights compute in fp8, 4-byte weights in fp32, everything else in bf16."""
    if model.bytes_per_weight == 1:
        return "fp8"
    return "fp32" if model.bytes_per_weight >= 4 else "bf16"


def expected_experts(experts: int, active: int, tokens):
    """Expected distinct routed experts touched by `tokens` tokens with uniform top-`active` routing."""
    return experts * (1.0 - (1.0 - active / experts) ** tokens)


def _between(x, at, values):
    """`values` (one scalar or array each point of `at`, ascending) at x: linear between the two
    points around it, held beyond the ends; elementwise over arrays."""
    if len(values) == 1:
        return values[0]
    k = np.clip(np.searchsorted(at, x) - 1, 0, len(at) - 2)
    w = np.clip((x - at[k]) / (at[k + 1] - at[k]), 0.0, 1.0)
    stack = np.array(np.broadcast_arrays(*values))  # (points, ...)
    lo = np.take_along_axis(stack, np.asarray(k)[None], 0)[0]
    hi = np.take_along_axis(stack, np.asarray(k + 1)[None], 0)[0]
    return lo * (1 - w) + hi * w


def _log_interp(x, at, values):
    """A measured curve's value at size x (scalar or array): linear in log size between the
    sizes `at` (their logs), held beyond the ends (sizes below 1 read as 1)."""
    return np.interp(np.log(np.maximum(x, 1.0)), at, values)


def _size_table(curve: tuple):
    """A measured ((size, value), ...) curve as (log sizes, values) for _log_interp; None if empty."""
    return (np.log([n for n, _ in curve]), np.array([x for _, x in curve])) if curve else None


def _max(a, b):
    """Elementwise max that stays a Python float for scalars (a single step pays no numpy overhead)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.maximum(a, b)
    return a if a > b else b


class ForwardCost:
    """Prices forward passes of one model on one device type; the coefficients are computed once.

    Work is split evenly over `tp` devices; time is one device's. `layers` prices only the first
    layers (a drafter that is a slice of a model); `lm_head` adds the embedding gather and LM head.
    """

    def __init__(self, model: ModelSpec, hw: HardwareSpec, tp: int = 1, layers: int | None = None,
                 lm_head: bool = True):
        self.model, self.hw, self.tp, self.lm_head = model, hw, tp, lm_head
        self.fc = hw.peak(compute_dtype(model)) * hw.eta_compute
        self.bw = hw.mem_bw * hw.eta_memory
        self.kv_bw = self.bw * hw.eta_kv
        # measured eta_kv per gather size (hardware.kv_sizes): log bytes -> eta_kv; and warm
        # (hardware.kv_sizes_warm) where the model's weights fit the last-level cache, for a
        # layer's gather of at most kv_room bytes (every layer's then fits beside the weights)
        self.kv_curve = _size_table(hw.kv_sizes)
        self.kv_warm = _size_table(hw.kv_sizes_warm) if hw.resident_bytes else None
        self.kv_room = (hw.cache_bytes - hw.resident_bytes) / max(1, model.layers)
        # the model's own decode curves (hardware.kv_decode, kv_decode_warm) where measured: its
        # sequences with one query token gather (and compute, beyond the compute roof) at those rates
        geometry = attention_geometry(model, tp)
        self.dec_curve = _size_table(dict(hw.kv_decode).get(geometry, ()))
        self.dec_warm = _size_table(dict(hw.kv_decode_warm).get(geometry, ())) if hw.resident_bytes else None
        # 0 where the warm matmul curves price the products (the weights sit in the last-level
        # cache: those curves were timed with the weights read from there, so streaming them at
        # the memory roof would charge them twice), else 1
        self.weight_stream = 0.0 if hw.warm_priced else 1.0
        self.attn_fc = self.fc * hw.eta_attn
        self.attn_dense = hw.attn_dense
        self.m0 = hw.gemm_half_rows
        n = model.layers if layers is None else layers
        self.n_layers = n
        self.moe = min(model.moe_layers, n)
        self.dense = n - self.moe
        m = model
        # activations each linear layer reads and writes per token (qkv in/out, o in/out, ffn in/out)
        qkv_out = (m.heads + 2 * m.kv_heads) * m.head_dim
        self.act_per_tok = (4 * m.hidden + qkv_out + m.heads * m.head_dim + 3 * m.ffn) * ACT_BYTES / tp
        dense_params = m.attn_params + m.dense_ffn_params
        self.dense_flops_per_tok = 2.0 * dense_params / tp
        self.dense_weight_bytes = dense_params * m.bytes_per_weight / tp
        self.moe_flops_per_tok = 2.0 * (m.attn_params + (m.active_experts + m.shared_experts) * m.expert_params) / tp
        self.moe_attn_bytes = m.attn_params * m.bytes_per_weight / tp
        self.expert_bytes = m.expert_params * m.bytes_per_weight / tp
        # attention: scores and values over the context; KV read once per sequence, new KV written
        self.kv_tok = m.kv_elems_per_token_layer * m.bytes_per_kv / tp
        self.attn_flops_per_pair = m.attn_flops_per_pair / tp
        self.attn_act_per_tok = 2 * m.heads * m.head_dim * ACT_BYTES / tp
        self.fused_query = hw.fused_query_s * m.heads / tp  # per query token of a sequence with several, all its heads
        self.fused_key = hw.fused_key_s * m.heads / tp  # per key such a sequence attends to
        # and by its query rows and size where measured: (log sizes, [(rows, per key, all its heads)])
        self.fused_rows = _rows_table(hw.fused_rows, m.heads / tp)
        self.fused_own = _rows_table(hw.fused_own, m.heads / tp)  # a sequence's call of its own
        # measured in place: (rows, [(sequences, seconds a group-call sequence)]) (hardware.verify_seqs)
        self.verify_seqs = (np.array([r for r, _ in hw.verify_seqs], float),
                            [(np.array([n for n, _ in c], float), np.array([x for _, x in c])) for _, c in hw.verify_seqs]) \
            if hw.verify_seqs else None
        self.launch = n * KERNELS_PER_LAYER * hw.launch_s
        dense_el, moe_el = elementwise_elems(m)
        self.elementwise = (self.dense * dense_el + self.moe * moe_el) / tp * hw.elementwise_s  # per token
        # measured time per element by a layer's elements (hardware.elementwise_sizes): log elements ->
        # seconds, with (layers, elements per token) of the dense and MoE layers
        self.ew_curve = (*_size_table(hw.elementwise_sizes), ((self.dense, dense_el / tp), (self.moe, moe_el / tp))) \
            if hw.elementwise_sizes else None
        self.multi_query = n * hw.multi_query_s  # when some sequence has several query tokens
        self.batch_query = n * hw.batch_query_s  # and more when several sequences may have (seqs > 1)
        self.mixed_query = n * hw.mixed_query_s  # and more when others have one (Work.mixed)
        self.allreduce_per_tok = n * 2 * (2 * (tp - 1) / tp * m.hidden * ACT_BYTES / hw.link_bw) if tp > 1 else 0.0
        self.allreduce_fixed = n * 2 * hw.allreduce_latency_s if tp > 1 else 0.0
        self.lm_flops_per_tok = 2.0 * m.head_params / tp
        self.lm_weight_bytes = m.head_params * m.bytes_per_weight / tp
        self.logit_bytes = m.vocab * LOGIT_BYTES / tp
        self.logit_pass = m.vocab * hw.logit_s  # sampling or verifying one LM-head row (hardware.logit_s)
        self.embed_bytes_per_tok = m.hidden * m.bytes_per_weight
        # measured per-matrix matmul efficiency (hardware.matmul_rows, and matmul_shapes for the
        # shapes measured): [(params, curve)] per layer kind
        self.curves = None
        if hw.matmul_rows:
            attn, ffn, expert = ([(k * n, matrix_curve(hw, k, n, m.bytes_per_weight)) for k, n in mats]
                                 for mats in weight_shapes(m, tp))
            self.curves = {"dense": attn + ffn, "attn": attn, "expert": expert,
                           "lm": [(m.head_params / tp, matrix_curve(hw, m.hidden, m.vocab / tp, m.bytes_per_weight))]}
        self._parts: dict = {}

    def __call__(self, w: Work, scale: tuple[float, float] = (1.0, 1.0)) -> Cost:
        """The pass's cost; `scale` multiplies the compute time of its layers' products and of its
        LM head's (weights used again within a step: reuse_factor)."""
        tokens, lm = w.tokens, w.lm_tokens
        scalar = type(tokens) is int and type(lm) is int and scale == (1.0, 1.0)
        part = self._parts.get((tokens, lm)) if scalar else None
        if part is None:
            part = self._token_part(tokens, lm, scale)
            if scalar:
                if len(self._parts) > 100_000:
                    self._parts.clear()
                self._parts[(tokens, lm)] = part
        t, flops, nbytes, c_sum, m_sum = part
        # attention: scores and values over the context; KV read once per sequence, new KV written
        n = self.n_layers
        f_attn = self.attn_flops_per_pair * w.pairs
        b_attn = self.kv_tok * (w.kv_read + tokens) + self.attn_act_per_tok * tokens
        if self.attn_dense:  # the CPU reference: its calls' padded keys gathered, computed and masked too
            w = w._replace(kv_read=w.kv_read + w.group_pad + w.decode_pad, multi_kv=w.multi_kv + w.group_pad)
        # dense: every query of a sequence against all its gathered keys (as many as kv_read /
        # seqs on average), where that exceeds the visible pairs (a prefill chunk's causal half)
        run = self.attn_flops_per_pair * _max(w.pairs, tokens * w.kv_read / w.seqs) if self.attn_dense else f_attn
        b_kv = self.kv_tok * (w.kv_read + tokens)
        # the sequences with one query token: their keys and new token's
        b_dec = self.kv_tok * (w.kv_read - w.multi_kv + tokens - w.multi_tokens) if self.dec_curve is not None else 0.0
        c_attn, m_attn = run / self.attn_fc, self.kv_time(b_kv, b_dec) + self.attn_act_per_tok * tokens / self.bw
        if self.multi_query or self.batch_query or self.mixed_query:
            t = t + self.query_host(w.tokens, w.seqs, w.mixed)
        if self.fused_query or self.fused_key or self.fused_rows is not None or self.fused_own is not None \
                or self.verify_seqs is not None:  # beside the roofs
            t = t + self.fused_time(w.multi_tokens, w.multi_kv, w.multi_seqs, w.own_tokens, w.own_kv, w.own_seqs)
        # flops and bytes: the work itself (the padded keys only cost time)
        return Cost(time=t + n * self.attention(c_attn, m_attn), flops=flops + n * f_attn, bytes=nbytes + n * b_attn,
                    compute_time=c_sum + n * c_attn, memory_time=m_sum + n * m_attn)

    def fused_time(self, multi_tokens, multi_kv, multi_seqs, own_tokens=0, own_kv=0, own_seqs=0):
        """Every layer's fused-attention time beside the roofs: per query token and per key of the
        `multi_seqs` sequences with several query tokens (Work.multi_tokens, multi_kv, multi_seqs),
        `own_seqs` of them in calls of their own (Work.own_*: on hardware.fused_own where
        measured, else with the others); and where measured in place (hardware.verify_seqs), each
        of the others' (the group calls') share beyond all that."""
        if self.fused_own is None:
            keys = self.fused_key_rate(multi_tokens, multi_seqs, multi_kv) * multi_kv
        else:
            group_kv = multi_kv - own_kv
            keys = (self.fused_key_rate(multi_tokens - own_tokens, multi_seqs - own_seqs, group_kv) * group_kv
                    + self.fused_key_rate(own_tokens, own_seqs, own_kv / np.maximum(own_seqs, 1), own=True) * own_kv)
        if self.verify_seqs is not None:
            keys = keys + self.group_seq_time(multi_tokens - own_tokens, multi_seqs - own_seqs)
        return self.n_layers * (self.fused_query * multi_tokens + keys)

    def group_seq_time(self, tokens, seqs):
        """A layer's time beyond its price for `seqs` sequences verifying `tokens` query tokens in
        all in the fused group calls (hardware.verify_seqs: a sequence's at that many sequences, at
        their mean query rows)."""
        at, curves = self.verify_seqs
        rows = tokens / np.maximum(seqs, 1)
        per = _between(rows, at, [np.interp(seqs, n, x) for n, x in curves])
        t = seqs * per
        return t if isinstance(t, np.ndarray) and t.ndim else float(t)

    def fused_key_rate(self, multi_tokens, multi_seqs, multi_kv, own=False):
        """Seconds a layer per key that sequences with several query tokens attend to: on
        hardware.fused_rows at their mean query rows (while within a curve's rows, else
        fused_key_s) and their K and V's bytes (multi_kv keys); `own`: on hardware.fused_own (a
        call's K and V, each sequence's), its curves held beyond their last rows."""
        table = self.fused_own if own else self.fused_rows
        if table is None:
            return self.fused_key
        sizes, curves = table
        rows = multi_tokens / np.maximum(multi_seqs, 1)
        rates = [np.interp(rows, at, per) if own else np.where(rows <= at[-1], np.interp(rows, at, per), self.fused_key)
                 for at, per in curves]
        # linear in log size between the two curves around it, held beyond the ends
        rate = _between(np.log(np.maximum(self.kv_tok * multi_kv, 1.0)), sizes, rates)
        return rate if isinstance(rate, np.ndarray) and rate.ndim else float(rate)

    def elementwise_time(self, tokens):
        """Every layer's unfused elementwise passes over `tokens` tokens: per element at the time
        measured for a layer's passes of that many elements (hardware.elementwise_sizes) where
        there is one, else at elementwise_s."""
        if self.ew_curve is None:
            return self.elementwise * tokens
        at, per, kinds = self.ew_curve
        t = 0.0
        for layers, el in kinds:
            if layers and el:
                n = el * tokens
                t = t + layers * n * _log_interp(n, at, per)
        return t if isinstance(tokens, np.ndarray) else float(t)

    @property
    def gather_by_size(self) -> bool:
        """Whether kv_time reads a measured curve (not linear in the bytes)."""
        return self.kv_curve is not None or self.dec_curve is not None

    def kv_time(self, b_kv, b_dec=0.0):
        """Time of one layer's KV read of b_kv bytes, b_dec of them the decoding sequences'
        (those with one query token): at the rates measured for a layer's gather of b_kv bytes,
        b_dec on the model's own decode curve (hardware.kv_decode) where measured, the rest on
        kv_sizes (each on its warm curve while the gather fits beside cached weights: kv_room),
        else at eta_kv."""
        if self.dec_curve is None:
            b_dec = 0.0
        rest = b_kv - b_dec
        t = rest / self.kv_bw if self.kv_curve is None else rest / (self.bw * self._eta(b_kv, self.kv_curve, self.kv_warm))
        if self.dec_curve is not None:
            t = t + b_dec / (self.bw * self._eta(b_kv, self.dec_curve, self.dec_warm))
        return t if isinstance(b_kv, np.ndarray) else float(t)

    def _eta(self, b_kv, cold, warm):
        """A curve's eta at a layer's gather of b_kv bytes: the warm curve's while it fits (kv_room)."""
        eta = _log_interp(b_kv, *cold)
        return eta if warm is None else np.where(b_kv <= self.kv_room, _log_interp(b_kv, *warm), eta)

    def query_host(self, tokens, seqs, mixed=0):
        """Host time of a pass in which some sequence has several query tokens (tokens > seqs),
        more when there are several sequences (which may all have), and more again when some of
        them have one (`mixed`: the CPU reference attends to those in a call of their own)."""
        several = tokens > seqs
        return self.multi_query * several + self.batch_query * (several & (seqs > 1)) + self.mixed_query * mixed

    def attention(self, c_attn, m_attn):
        """Time of attention's compute and memory roofs: their sum where reads precede products
        (hardware.attn_dense), else the larger."""
        return c_attn + m_attn if self.attn_dense else _max(c_attn, m_attn)

    def _compute(self, flops, rows, kind: str, extra: str | None = None, times: int = 0):
        """Compute time of `flops` over `rows` token rows: per weight matrix through the measured
        efficiency curves (kind's matrices, plus `times` x extra's; `flops` is then theirs), else
        at rows / (rows + gemm_half_rows) of the compute rate (the plain rate when that is 0)."""
        r = np.maximum(rows, 1) if isinstance(rows, np.ndarray) else max(rows, 1)
        if self.curves is None:
            return flops / self.fc * ((r + self.m0) / r if self.m0 else 1.0)
        mats = self.curves[kind] + (self.curves[extra] * times if extra else [])
        t = sum(2.0 * p * r / np.interp(r, at, frac) for p, (at, frac) in mats) / self.fc
        t = t * step_factor(self.hw, r, "lm" if kind == "lm" else "layers")  # in situ (gemm_step)
        return t if isinstance(rows, np.ndarray) else float(t)

    def _token_part(self, tokens, lm_tokens, scale: tuple[float, float] = (1.0, 1.0)):
        """Everything but attention: it depends only on the token counts (cached for scalars) and
        `scale`, the factors on the compute time of the layers' products and the LM head's."""
        m, bw = self.model, self.bw
        act = tokens * self.act_per_tok
        f_dense = self.dense_flops_per_tok * tokens
        b_dense = self.dense_weight_bytes + act
        c_dense = self._compute(f_dense, tokens, "dense") * scale[0]
        m_dense = (self.weight_stream * self.dense_weight_bytes + act) / bw
        dense, moe = self.dense, self.moe
        t = dense * _max(c_dense, m_dense) + self.launch + self.elementwise_time(tokens)
        flops, nbytes = dense * f_dense, dense * b_dense
        c_sum, m_sum = dense * c_dense, dense * m_dense
        if moe:  # FLOPs of the active experts, bytes of the experts actually touched
            touched = expected_experts(m.experts, m.active_experts, tokens) + m.shared_experts
            f_moe = self.moe_flops_per_tok * tokens
            w_moe = self.moe_attn_bytes + touched * self.expert_bytes
            b_moe = w_moe + act
            c_moe = self._compute(f_moe, tokens, "attn", "expert", m.active_experts + m.shared_experts) * scale[0]
            m_moe = (self.weight_stream * w_moe + act) / bw
            t = t + moe * _max(c_moe, m_moe)
            flops, nbytes = flops + moe * f_moe, nbytes + moe * b_moe
            c_sum, m_sum = c_sum + moe * c_moe, m_sum + moe * m_moe
        if self.tp > 1:  # two ring all-reduces per layer of the hidden states
            t = t + self.allreduce_per_tok * tokens + self.allreduce_fixed
        if self.lm_head:  # embedding gather + LM head over the sampled positions
            f_lm = self.lm_flops_per_tok * lm_tokens
            io_lm = self.logit_bytes * lm_tokens + self.embed_bytes_per_tok * tokens
            b_lm = self.lm_weight_bytes + io_lm
            c_lm = self._compute(f_lm, lm_tokens, "lm") * scale[1]
            m_lm = (self.weight_stream * self.lm_weight_bytes + io_lm) / bw
            t = t + _max(c_lm, m_lm) + LM_HEAD_KERNELS * self.hw.launch_s + self.logit_pass * lm_tokens
            flops, nbytes = flops + f_lm, nbytes + b_lm
            c_sum, m_sum = c_sum + c_lm, m_sum + m_lm
        return t, flops, nbytes, c_sum, m_sum


def elementwise_elems(m: ModelSpec) -> tuple[float, float]:
    """Activation elements per token that one layer's elementwise passes touch (two norms and
    two residual adds over the hidden state, rotary embedding and layout copies of q and k, the
    gate's activation and product): (dense layer, MoE layer with its active and shared experts)."""
    common = 4 * m.hidden + 2 * (m.heads + 2 * m.kv_heads) * m.head_dim
    return common + 2 * m.ffn, common + 2 * (m.active_experts + m.shared_experts) * m.expert_ffn


def weight_shapes(m: ModelSpec, tp: int) -> tuple[list, list, list]:
    """(k, n) of each weight matrix of one layer as the engine multiplies a token row by it
    (`h @ W.T`, W (n, k): fused QKV, output projection, fused gate-up, down; one expert's gate-up
    and down), split over tp: the column-parallel ones (QKV, gate-up) by n, the row-parallel ones
    by k. MLA's projections count as one matrix from the hidden state (their size, not a shape
    the engine runs)."""
    h = m.hidden
    if m.attention == "mla":
        attn = [(h, m.attn_params / h / tp)]
    else:
        attn = [(h, (m.heads + 2 * m.kv_heads) * m.head_dim / tp), (m.heads * m.head_dim / tp, h)]
    ffn = [(h, 2 * m.ffn / tp), (m.ffn / tp, h)]
    expert = [(h, 2 * m.expert_ffn / tp), (m.expert_ffn / tp, h)]
    return attn, ffn, expert


def attention_geometry(m: ModelSpec, tp: int = 1) -> tuple[int, int, int] | None:
    """(KV heads per device, query heads per KV head, head_dim) of a model's attention: the key
    of its decode curves (hardware.kv_decode); None for MLA, which the engine does not run."""
    if m.attention == "mla":
        return None
    return max(1, m.kv_heads // tp), max(1, m.heads // m.kv_heads), m.head_dim


def model_shapes(m: ModelSpec, tp: int = 1) -> set[tuple[int, int]]:
    """Every (k, n) a forward pass of `m` multiplies by (weight_shapes' and the LM head's), the
    whole-number ones (a shape a calibration can time)."""
    attn, ffn, expert = weight_shapes(m, tp)
    return whole_shapes(attn + ffn + (expert if m.experts else []) + [(m.hidden, m.vocab / tp)])


def whole_shapes(mats) -> set[tuple[int, int]]:
    """The (k, n) among `mats` with whole, positive k and n, as integers."""
    return {(int(k), int(n)) for k, n in mats if k == int(k) and n == int(n) and k > 0 and n > 0}


def matrix_curve(hw: HardwareSpec, k: float, n: float, bytes_per_weight: float) -> tuple[np.ndarray, np.ndarray]:
    """(rows (points,), fraction (points,)) pricing a k x n weight matrix's products: its shape's
    own curve where one was measured (hardware.matmul_shapes), else its size's (gemm_curve)."""
    return _curve(hw, k * n * bytes_per_weight, (k, n))


def _curve(hw: HardwareSpec, weight_bytes: float, shape: tuple | None):
    """The measured curve of `shape` where there is one, else that of `weight_bytes`."""
    curve = _shape_table(hw.matmul_shapes).get(shape) if shape else None
    return curve if curve is not None else gemm_curve(hw.matmul_rows, weight_bytes)


@lru_cache(maxsize=64)
def _shape_table(shapes: tuple) -> dict:
    """A gemm_shapes table as {(k, n): (rows (points,), fraction (points,))}."""
    return {kn: (np.array([r for r, _ in c], dtype=float), np.array([f for _, f in c])) for kn, c in shapes}


REUSE_PARTS = ("first", "later_layer", "later_lm")
STEP_PARTS = ("layers", "lm")  # gemm_step's columns: a forward's layers' products, its LM head's
STEP_OF = {"first": "lm", "later_layer": "layers", "later_lm": "lm"}  # the step part each reuse part prices


def step_factor(hw: HardwareSpec, rows, part: str):
    """The factor on the warm curves' price of a product taken in an engine's step
    (hardware.gemm_step), `part` one of STEP_PARTS, at `rows` rows (an array gives an array); 1
    where the profile has none or the warm curves do not price the model."""
    if not hw.gemm_step or not hw.warm_priced:
        return 1.0
    at, cols = _factor_table(hw.gemm_step, STEP_PARTS)
    f = np.interp(np.maximum(rows, 1), at, cols[part])
    return f if isinstance(rows, np.ndarray) else float(f)


def reuse_factor(hw: HardwareSpec, rows, part: str) -> float:
    """The factor on the step price (the warm curves' times step_factor) of a product of
    weights used again within a step (hardware.gemm_reuse, `part` one of REUSE_PARTS) at `rows`
    rows: gemm_reuse's factor, which is over the warm curves' price, over the step factor of its
    kind; 1 where the profile has none or the warm curves do not price the model."""
    if not hw.gemm_reuse or not hw.warm_priced:
        return 1.0
    at, cols = _factor_table(hw.gemm_reuse, REUSE_PARTS)
    return float(np.interp(max(rows, 1), at, cols[part])) / step_factor(hw, rows, STEP_OF[part])


@lru_cache(maxsize=16)
def _factor_table(table: tuple, parts: tuple) -> tuple[np.ndarray, dict]:
    """A table of factors by rows (gemm_reuse, gemm_step) as (rows (points,), {part: factors (points,)})."""
    arr = np.array(table, dtype=float)  # (points, 1 + len(parts))
    return arr[:, 0], {p: arr[:, 1 + i] for i, p in enumerate(parts)}


def row_efficiency(hw: HardwareSpec, weight_bytes: float, rows, shape: tuple | None = None) -> float:
    """The fraction of peak·eta_compute a product of `rows` token rows with one weight matrix of
    `weight_bytes` (of `shape`, (k, n), where known) reaches: its measured curve (matrix_curve),
    else rows / (rows + gemm_half_rows), else 1 (what ForwardCost._compute applies to a model's
    matrices)."""
    r = max(rows, 1)
    if hw.matmul_rows:
        return float(np.interp(r, *_curve(hw, weight_bytes, shape)))
    return r / (r + hw.gemm_half_rows) if hw.gemm_half_rows else 1.0


@lru_cache(maxsize=1024)
def gemm_curve(table: tuple, weight_bytes: float) -> tuple[np.ndarray, np.ndarray]:
    """(rows (points,), fraction (points,)) for a matrix of `weight_bytes`: hardware.gemm_rows'
    curves blended linearly in log size between the two measured sizes around it."""
    rows = np.array([r for r, _ in table[0][1]], dtype=float)
    sizes = np.log([b for b, _ in table])
    fracs = np.array([[f for _, f in c] for _, c in table])  # (sizes, points)
    x = np.log(max(weight_bytes, 1.0))
    frac = np.array([np.interp(x, sizes, fracs[:, j]) for j in range(len(rows))])
    return rows, frac


def forward_cost(model: ModelSpec, hw: HardwareSpec, tp: int, w: Work, layers: int | None = None,
                 lm_head: bool = True) -> Cost:
    """One forward pass of `model` over the batch described by `w` (see ForwardCost)."""
    return ForwardCost(model, hw, tp, layers, lm_head)(w)


def _rows_table(curves: tuple, heads: float):
    """hardware.fused_rows or fused_own as the cost model reads it: (log sizes, [(rows, seconds
    per key for `heads` query heads)]), or None where empty."""
    if not curves:
        return None
    return (np.log([b for b, _ in curves]),
            [(np.array([r for r, _ in c], float), np.array([x for _, x in c]) * heads) for _, c in curves])


def host_time(hw: HardwareSpec, seqs, alloc_ops=0, copy_bytes=0):
    """Per-step host overhead, allocator operations, and KV copies (read + write) on the device."""
    return (hw.step_overhead_s + hw.seq_overhead_s * seqs + hw.alloc_op_s * alloc_ops
            + 2.0 * copy_bytes / (hw.mem_bw * hw.eta_memory))


def verify_host(hw: HardwareSpec, calls=1, tree_calls=0, tree_nodes=0, drafted=0, nodes=0):
    """Host time of the engine's verification around a pass, beyond its logits
    (hardware.verify_call_s): `calls` verification calls (one per distinct draft shape among the
    sequences that sample, a decode's being the empty one), `tree_calls` of them trees of
    `tree_nodes` nodes in all (each walks its ancestor table), `drafted` sequences with drafts
    (a speculative step's work beyond a decode's: spec_step_s once if any, spec_seq_s each), and
    `nodes` drafted nodes packed."""
    return (hw.verify_call_s * calls + hw.tree_call_s * tree_calls + hw.tree_node_s * tree_nodes
            + (hw.spec_step_s if drafted else 0.0) + hw.spec_seq_s * drafted + hw.pack_node_s * nodes)


def verify_calls(shapes) -> tuple[int, int, int, int]:
    """(calls, tree calls, their nodes, sequences with drafts) of the engine's verification of a
    step whose sampling sequences have these draft shapes (parents tuples, () for a decode): it
    verifies each distinct shape in one call, a chain without a tree walk."""
    shapes = list(shapes)
    distinct = set(shapes)
    trees = [p for p in distinct if p and not is_chain(p)]
    return len(distinct), len(trees), sum(map(len, trees)), sum(1 for p in shapes if p)


def bound_of(compute_time, memory_time):
    """Which roof binds: 'compute' or 'memory' (arrays give an array of labels)."""
    if isinstance(compute_time, np.ndarray) or isinstance(memory_time, np.ndarray):
        return np.where(compute_time > memory_time, "compute", "memory")
    return "compute" if compute_time > memory_time else "memory"
