"""A Llama-style decoder over a paged KV cache (Llama 3: RMSNorm, RoPE, GQA, SwiGLU; Touvron et al.
2023, Dubey et al. 2024), built from a `sim.models.ModelSpec`.

One `forward` is one engine step: a flat batch of query tokens from many sequences (prefill
chunks, single decode tokens, chain- and tree-verify tokens), laid out by `StepBatch.pack` in the
kernel contract of `kernels.attention` (kv_slots / kv_lens / q_seq / q_pos / tree_start / q_anc).

Two notions of position, kept apart:
* layout position (q_pos): the token's column in its sequence's kv_slots row: committed tokens
  0..ctx+q-1, then the drafted nodes in node order (node j at ctx+q+j);
* RoPE position: where the token sits in the text. Committed token t sits at t; a drafted node at
  depth d (1 = child of the last committed token) sits at ctx+q-1+d, the position it takes if
  accepted. For a chain both coincide.

`reference_forward` is the dense check: plain masked attention over one sequence, no cache.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import torch

from kernels import NO_TREE, ancestor_masks, get_ops
from sim.models import ModelSpec

ROPE_THETA = 500_000.0  # Llama 3
NORM_EPS = 1e-5
LOGIT_STD = 4.0  # random models: spread of the logits (greedy decoding rarely meets near-ties)
OUT_GAIN = 8.0  # random models: scale of each attention / FFN output added to the residual stream


def check_dense(spec: ModelSpec) -> None:
    """The engine builds dense Llama-style models only."""
    if spec.experts or spec.attention != "mha":
        raise ValueError(f"model {spec.name!r} is {'MoE' if spec.experts else 'MLA'}: the engine builds dense "
                         "Llama-style (GQA) models only")
    if spec.head_dim % 2:
        raise ValueError(f"head_dim must be even for RoPE, got {spec.head_dim}")
    if spec.heads % spec.kv_heads:
        raise ValueError(f"heads ({spec.heads}) must be a multiple of kv_heads ({spec.kv_heads})")


# ------------------------------------------------------------------------------------ step layout

@dataclass
class SeqQuery:
    """One sequence's share of a step.

    tokens: the committed query tokens (a prefill chunk, or the last sampled token), which sit at
    positions ctx..ctx+len-1; index: the sequence's committed slots, positions 0..ctx+len-1 (this
    step's included), a list or a 1-D int64 CPU tensor (the runner keeps tensors, so a long
    context is not rebuilt from Python ints every step); nodes/parents/spec_slots: drafted tokens, their tree and their slots;
    logits: whether to compute logits for the last committed query token and every node.
    """

    tokens: Sequence[int]
    ctx: int
    index: Sequence[int] | torch.Tensor
    nodes: Sequence[int] = ()
    parents: Sequence[int] = ()
    spec_slots: Sequence[int] = ()
    logits: bool = True


@dataclass
class StepBatch:
    """Flat tensors of one step (N query tokens, B sequences); see kernels.attention."""

    token_ids: torch.Tensor  # (N,) int64
    rope_pos: torch.Tensor  # (N,) int64
    store_slots: torch.Tensor  # (N,) int64: where each query token's K/V goes
    kv_slots: torch.Tensor  # (B, L_max) int64: each sequence's slot per layout position (0-padded)
    kv_lens: torch.Tensor  # (B,) int64
    q_seq: torch.Tensor  # (N,) int64
    q_pos: torch.Tensor  # (N,) int64 layout position
    tree_start: torch.Tensor  # (B,) int64 (NO_TREE without a tree)
    q_anc: torch.Tensor  # (N,) int64 ancestor-or-self bitmask of tree nodes (0 otherwise)
    logit_rows: torch.Tensor  # (R,) int64 rows of the flat batch whose logits are wanted
    max_pos: int = 0  # the largest RoPE position (host int)
    row_start: list[int] = field(default_factory=list)  # per sequence: its first row in the flat batch
    logit_start: list[int] = field(default_factory=list)  # per sequence: its first logits row, or -1

    @property
    def num_tokens(self) -> int:
        return int(self.token_ids.shape[0])

    @staticmethod
    def pack(seqs: Sequence[SeqQuery], device: torch.device | str = "cpu") -> "StepBatch":
        ids: list[int] = []
        rope: list[int] = []
        store: list[int] = []
        qseq: list[int] = []
        qpos: list[int] = []
        anc: list[int] = []
        rows: list[int] = []
        tstart: list[int] = []
        lens: list[int] = []
        row_start, logit_start = [], []
        for b, s in enumerate(seqs):
            q, ctx, t = len(s.tokens), s.ctx, len(s.nodes)
            end = ctx + q  # committed length after this step
            assert len(s.index) == end, f"sequence {b}: index holds {len(s.index)} slots, expected {end}"
            assert len(s.parents) == t and len(s.spec_slots) == t
            n0 = len(ids)
            row_start.append(n0)
            ids.extend(s.tokens)
            rope.extend(range(ctx, end))
            qpos.extend(range(ctx, end))
            new = s.index[ctx:end]
            store.extend(new.tolist() if isinstance(new, torch.Tensor) else new)
            anc.extend([0] * q)
            if t:
                depth: list[int] = []
                for p in s.parents:
                    depth.append(1 if p < 0 else depth[p] + 1)
                ids.extend(s.nodes)
                rope.extend(end - 1 + d for d in depth)
                qpos.extend(range(end, end + t))
                store.extend(s.spec_slots)
                anc.extend(ancestor_masks(s.parents))
                tstart.append(end)
            else:
                tstart.append(NO_TREE)
            qseq.extend([b] * (q + t))
            if s.logits:
                assert q >= 1, "logits need a committed query token (the root of the drafts)"
                logit_start.append(len(rows))
                rows.extend(range(n0 + q - 1, n0 + q + t))
            else:
                logit_start.append(-1)
            lens.append(end + t)
        L = max(lens, default=0)
        kv = torch.zeros((len(seqs), L), dtype=torch.int64)
        for b, s in enumerate(seqs):
            n = len(s.index)
            if n:
                kv[b, :n] = torch.as_tensor(s.index, dtype=torch.int64)
            if len(s.spec_slots):
                kv[b, n:n + len(s.spec_slots)] = torch.as_tensor(list(s.spec_slots), dtype=torch.int64)
        t64 = lambda x: torch.as_tensor(x, dtype=torch.int64).to(device)  # noqa: E731
        return StepBatch(token_ids=t64(ids), rope_pos=t64(rope), store_slots=t64(store), kv_slots=kv.to(device),
                         kv_lens=t64(lens), q_seq=t64(qseq), q_pos=t64(qpos), tree_start=t64(tstart),
                         q_anc=t64(anc), logit_rows=t64(rows), max_pos=max(rope, default=0), row_start=row_start,
                         logit_start=logit_start)


# ------------------------------------------------------------------------------------ the model

class Rope:
    """cos/sin tables (rotate-half layout, as Llama's HF checkpoints), grown on demand."""

    def __init__(self, head_dim: int, theta: float, device, dtype=torch.float32):
        self.inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))  # (d/2,)
        self.device, self.dtype = device, dtype
        self.cos = self.sin = torch.empty(0)
        self._grow(4096)

    def _grow(self, n: int) -> None:
        t = torch.arange(n, dtype=torch.float64)
        f = torch.outer(t, self.inv_freq)  # (n, d/2)
        emb = torch.cat([f, f], dim=-1)  # (n, d)
        self.cos = emb.cos().to(self.device, self.dtype)
        self.sin = emb.sin().to(self.device, self.dtype)

    def ensure(self, max_pos: int) -> None:
        """Make positions up to max_pos valid (checked on the host: no device sync per call)."""
        if max_pos >= self.cos.shape[0]:
            self._grow(max(2 * self.cos.shape[0], max_pos + 1))

    def __call__(self, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        """x (N, heads, d), pos (N,) -> x rotated by its positions (< the table size, see ensure)."""
        cos = self.cos[pos].unsqueeze(1)  # (N, 1, d)
        sin = self.sin[pos].unsqueeze(1)
        h = x.shape[-1] // 2
        rot = torch.cat([-x[..., h:], x[..., :h]], dim=-1)
        return x * cos + rot * sin


class Layer:
    __slots__ = ("attn_norm", "wqkv", "wo", "ffn_norm", "w_gate_up", "w_down")

    def __init__(self, attn_norm, wqkv, wo, ffn_norm, w_gate_up, w_down):
        self.attn_norm = attn_norm  # (H,)
        self.wqkv = wqkv  # ((nh + 2 nkv) d, H)
        self.wo = wo  # (H, nh d)
        self.ffn_norm = ffn_norm  # (H,)
        self.w_gate_up = w_gate_up  # (2F, H)
        self.w_down = w_down  # (H, F)


class Model:
    """Weights and the batched paged forward. Random weights from a seed (`Model.random`)."""

    def __init__(self, spec: ModelSpec, embed: torch.Tensor, layers: list[Layer], norm: torch.Tensor,
                 lm_head: torch.Tensor | None, backend: str = "torch", rope_theta: float = ROPE_THETA,
                 check_values: bool = True):
        """check_values: check the step's index tensors (in layer 0; the others share them).
        Drafters, whose passes the engine lays out itself, skip it."""
        check_dense(spec)
        self.spec = spec
        self.embed = embed  # (V, H)
        self.layers = layers
        self.norm = norm  # (H,)
        self.lm_head = embed if lm_head is None else lm_head  # (V, H); tied: the embedding itself
        self.device = embed.device
        self.dtype = embed.dtype
        # a step's index tensors are the same in every layer: check their values once (layer 0)
        self.ops_unchecked = get_ops(backend, check_values=False)
        self.ops = get_ops(backend) if check_values else self.ops_unchecked
        self.backend = backend
        self.rope_theta = rope_theta
        self.rope = Rope(spec.head_dim, rope_theta, self.device, self.dtype)
        self.scale = spec.head_dim ** -0.5

    # ---- construction -------------------------------------------------------------------------
    @staticmethod
    def random(spec: ModelSpec, seed: int, device: str | torch.device = "cpu", dtype=torch.float32,
               backend: str = "torch", rope_theta: float = ROPE_THETA, check_values: bool = True) -> "Model":
        """Seeded random weights (drawn on the CPU, so the same seed gives the same model anywhere).

        Scales keep activations O(1) through the residual stream and give logits a spread of a few
        units, so greedy decoding rarely meets near-ties."""
        check_dense(spec)
        g = torch.Generator().manual_seed(int(seed))
        H, nh, nkv, d, F, V = spec.hidden, spec.heads, spec.kv_heads, spec.head_dim, spec.ffn, spec.vocab

        def w(rows: int, cols: int, std: float) -> torch.Tensor:
            return (torch.randn((rows, cols), generator=g) * std).to(device, dtype)

        def norm_w() -> torch.Tensor:
            return (1.0 + 0.1 * torch.randn((H,), generator=g)).to(device, dtype)

        # The embedding is small next to the layers' outputs (which RMSNorm makes O(1) whatever
        # its scale), so that a tied head does not just predict the current token again.
        embed = w(V, H, LOGIT_STD * H ** -0.5)
        layers = []
        for _ in range(spec.layers):
            layers.append(Layer(norm_w(), w((nh + 2 * nkv) * d, H, H ** -0.5), w(H, nh * d, OUT_GAIN * (nh * d) ** -0.5),
                                norm_w(), w(2 * F, H, H ** -0.5), w(H, F, OUT_GAIN * F ** -0.5)))
        norm = norm_w()
        head = None if spec.tied_embeddings else w(V, H, LOGIT_STD * H ** -0.5)
        return Model(spec, embed, layers, norm, head, backend=backend, rope_theta=rope_theta, check_values=check_values)

    @property
    def weight_bytes(self) -> int:
        ts = [self.embed, self.norm] + ([] if self.lm_head is self.embed else [self.lm_head])
        for layer in self.layers:
            ts += [getattr(layer, k) for k in Layer.__slots__]
        return sum(t.numel() * t.element_size() for t in ts)

    # ---- the step -----------------------------------------------------------------------------
    @torch.inference_mode()
    def forward(self, step: StepBatch, cache, inputs: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Run the step's N query tokens through every layer, writing their K/V into `cache`
        (an engine.kv_cache.KVCache) at step.store_slots first, so each query sees itself.
        `inputs` (N, H) replaces the token embeddings (a drafter head's projected features).
        Returns (hidden (N, H) after the final norm, logits (R, V) for step.logit_rows)."""
        s, ops = self.spec, self.ops
        nh, nkv, d = s.heads, s.kv_heads, s.head_dim
        N = step.num_tokens
        self.rope.ensure(step.max_pos)
        x = self.embed[step.token_ids] if inputs is None else inputs  # (N, H) residual stream
        for li, layer in enumerate(self.layers):
            if li == 1:
                ops = self.ops_unchecked
            h = ops.rms_norm(x, layer.attn_norm, NORM_EPS)  # (N, H)
            qkv = h @ layer.wqkv.T  # (N, (nh + 2 nkv) d)
            q = self.rope(qkv[:, :nh * d].view(N, nh, d), step.rope_pos)  # (N, nh, d)
            k = self.rope(qkv[:, nh * d:(nh + nkv) * d].view(N, nkv, d), step.rope_pos)  # (N, nkv, d)
            v = qkv[:, (nh + nkv) * d:].reshape(N, nkv, d)  # (N, nkv, d)
            k_cache, v_cache = cache.layer(li)  # (slots, nkv, d) each
            ops.store_kv(k_cache, v_cache, k.contiguous(), v, step.store_slots)
            o = ops.paged_attention(q.contiguous(), k_cache, v_cache, step.kv_slots, step.kv_lens, step.q_seq,
                                    step.q_pos, step.tree_start, step.q_anc, self.scale)  # (N, nh, d)
            x = x + o.reshape(N, nh * d) @ layer.wo.T
            h = ops.rms_norm(x, layer.ffn_norm, NORM_EPS)
            gu = h @ layer.w_gate_up.T  # (N, 2F)
            F = gu.shape[1] // 2
            x = x + (torch.nn.functional.silu(gu[:, :F]) * gu[:, F:]) @ layer.w_down.T
        hidden = ops.rms_norm(x, self.norm, NORM_EPS)  # (N, H)
        logits = hidden[step.logit_rows] @ self.lm_head.T  # (R, V)
        return hidden, logits.float()


# ------------------------------------------------------------------------------------ dense reference

@torch.inference_mode()
def reference_forward(model: Model, tokens: Sequence[int], positions: Sequence[int] | None = None,
                      mask: torch.Tensor | None = None):
    """Dense forward of one sequence with plain attention (no cache, no kernels): the check.

    tokens (T,); positions (T,) RoPE positions (default 0..T-1); mask (T, T) bool, row i = keys
    query i sees (default causal). Returns (hidden (T, H), logits (T, V), [(k, v) per layer], each
    (T, nkv, d) after RoPE)."""
    s = model.spec
    nh, nkv, d = s.heads, s.kv_heads, s.head_dim
    dev = model.device
    ids = torch.as_tensor(list(tokens), dtype=torch.int64, device=dev)
    T = ids.shape[0]
    pos = torch.arange(T, device=dev) if positions is None else torch.as_tensor(list(positions), device=dev)
    model.rope.ensure(int(pos.max()) if T else 0)
    if mask is None:
        mask = torch.ones((T, T), dtype=torch.bool, device=dev).tril()
    mask = mask.to(dev)

    def norm(x, w):
        return x * torch.rsqrt(x.square().mean(-1, keepdim=True) + NORM_EPS) * w

    x = model.embed[ids].float()
    kvs = []
    for layer in model.layers:
        h = norm(x, layer.attn_norm.float())
        qkv = h @ layer.wqkv.float().T
        q = model.rope(qkv[:, :nh * d].view(T, nh, d), pos)
        k = model.rope(qkv[:, nh * d:(nh + nkv) * d].view(T, nkv, d), pos)
        v = qkv[:, (nh + nkv) * d:].reshape(T, nkv, d)
        kvs.append((k, v))
        kk = k.repeat_interleave(nh // nkv, dim=1)  # (T, nh, d)
        vv = v.repeat_interleave(nh // nkv, dim=1)
        scores = torch.einsum("qhd,khd->hqk", q, kk) * model.scale  # (nh, T, T)
        scores = scores.masked_fill(~mask[None], float("-inf"))
        o = torch.einsum("hqk,khd->qhd", torch.softmax(scores, dim=-1), vv)  # (T, nh, d)
        x = x + o.reshape(T, nh * d) @ layer.wo.float().T
        h = norm(x, layer.ffn_norm.float())
        gu = h @ layer.w_gate_up.float().T
        F = gu.shape[1] // 2
        x = x + (torch.nn.functional.silu(gu[:, :F]) * gu[:, F:]) @ layer.w_down.float().T
    hidden = norm(x, model.norm.float())
    return hidden, hidden @ model.lm_head.float().T, kvs
