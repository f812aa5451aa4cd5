"""The family's target model: a Llama-style decoder with DeepSeek-V3-style multi-token prediction (MTP).

The target is the engine's Llama-style decoder (engine/model.py: RMSNorm, RoPE rotate-half with
theta 500k, GQA, SwiGLU, tied embedding) written here as a training-time `nn.Module`, batched over
(B, T) with causal SDPA, whose parameters carry the engine's names and layouts, so the state dict
*is* the engine's weights:

    embed                 (V, H)                  Model.embed (= lm_head: tied)
    layers.{i}.attn_norm  (H,)                    Layer.attn_norm
    layers.{i}.wqkv       ((nh + 2 nkv) d, H)     Layer.wqkv   rows: q heads, k heads, v heads
    layers.{i}.wo         (H, nh d)               Layer.wo
    layers.{i}.ffn_norm   (H,)                    Layer.ffn_norm
    layers.{i}.w_gate_up  (2F, H)                 Layer.w_gate_up  rows: gate, then up
    layers.{i}.w_down     (H, F)                  Layer.w_down
    norm                  (H,)                    Model.norm
    mtp.{k}.hnorm, mtp.{k}.enorm (H,); mtp.{k}.proj (H, 2H); mtp.{k}.block.* (a layer, names as
    above); mtp.{k}.norm (H,)                     MTP module k+1 (the engine's `mtp` scheme)

`engine_model(state, config)` builds an `engine.model.Model` from it (tests check it against the
dense `reference_forward`).

MTP (arXiv:2412.19437 §2.2), D modules sharing the embedding and the output head. Let h^0_i be
the main model's hidden state at position i *after* its final norm (what the engine's forward
returns, and what the LM head reads). Module k (1-based) at position i takes h^{k-1}_i and the
embedding of token t_{i+k}:

    x = proj_k [RMSNorm(h^{k-1}_i) * hnorm_k ; RMSNorm(E t_{i+k}) * enorm_k]     (hidden first)
    h^k_i = RMSNorm(Block_k(x)) * norm_k,         logits = h^k_i E^T  -> predicts t_{i+k+1}

Block_k is one transformer layer with causal attention over the module's own sequence (the
positions i of the window, RoPE position i). Loss: L_main + (mtp_weight / D) * sum_k L_mtp_k.
Inference: module 1 drafts t_{n+2} from h^0_n and the just-sampled t_{n+1}, module 2 drafts
t_{n+3} from h^1_n and that draft, and so on (each module keeps its own KV cache).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from engine.corpus import FAMILY_DIR
from engine.model import NORM_EPS, ROPE_THETA, Layer, Model, Rope
from sim.models import ModelSpec

LAYER_KEYS = Layer.__slots__  # attn_norm, wqkv, wo, ffn_norm, w_gate_up, w_down
FORMAT = "specsim-target"


# ------------------------------------------------------------------------------------ configs

@dataclass(frozen=True)
class TargetConfig:
    """The target's shape (a sim.models.ModelSpec with tied embeddings) and its MTP depth."""

    name: str = "tiny"
    layers: int = 4
    hidden: int = 256
    heads: int = 4
    kv_heads: int = 2
    head_dim: int = 64
    ffn: int = 768
    vocab: int = 4096
    mtp: int = 2
    rope_theta: float = ROPE_THETA

    def spec(self) -> ModelSpec:
        return ModelSpec(name=self.name, layers=self.layers, hidden=self.hidden, heads=self.heads,
                         kv_heads=self.kv_heads, head_dim=self.head_dim, ffn=self.ffn, vocab=self.vocab,
                         tied_embeddings=True, bytes_per_weight=4.0, bytes_per_kv=4.0, mtp_modules=self.mtp)


def _from_dict(cls, d: dict):
    names = {f.name for f in fields(cls)}
    return cls(**{k: v for k, v in d.items() if k in names})


# ------------------------------------------------------------------------------------ the model

def rms_norm(x: torch.Tensor, w: torch.Tensor | None) -> torch.Tensor:
    return F.rms_norm(x, (x.shape[-1],), w, NORM_EPS)


class Block(nn.Module):
    """One decoder layer, with engine.model.Layer's weights and layouts."""

    def __init__(self, c: TargetConfig):
        super().__init__()
        H, nh, nkv, d, Fd = c.hidden, c.heads, c.kv_heads, c.head_dim, c.ffn
        self.nh, self.nkv, self.d = nh, nkv, d
        self.attn_norm = nn.Parameter(torch.ones(H))
        self.wqkv = nn.Parameter(torch.empty((nh + 2 * nkv) * d, H))
        self.wo = nn.Parameter(torch.empty(H, nh * d))
        self.ffn_norm = nn.Parameter(torch.ones(H))
        self.w_gate_up = nn.Parameter(torch.empty(2 * Fd, H))
        self.w_down = nn.Parameter(torch.empty(H, Fd))

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """x (B, T, H); cos/sin (T, d) -> (B, T, H), causal."""
        B, T, _ = x.shape
        nh, nkv, d = self.nh, self.nkv, self.d
        qkv = rms_norm(x, self.attn_norm) @ self.wqkv.T
        q = _rope(qkv[..., :nh * d].view(B, T, nh, d), cos, sin).transpose(1, 2)
        k = _rope(qkv[..., nh * d:(nh + nkv) * d].view(B, T, nkv, d), cos, sin).transpose(1, 2)
        v = qkv[..., (nh + nkv) * d:].view(B, T, nkv, d).transpose(1, 2)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=nh != nkv)  # (B, nh, T, d)
        x = x + o.transpose(1, 2).reshape(B, T, nh * d) @ self.wo.T
        gate, up = (rms_norm(x, self.ffn_norm) @ self.w_gate_up.T).chunk(2, dim=-1)
        return x + (F.silu(gate) * up) @ self.w_down.T


def _rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x (B, T, heads, d) rotated at positions 0..T-1 (rotate-half, as engine.model.Rope)."""
    h = x.shape[-1] // 2
    rot = torch.cat([-x[..., h:], x[..., :h]], dim=-1)
    return x * cos[:, None, :] + rot * sin[:, None, :]


class MTPModule(nn.Module):
    def __init__(self, c: TargetConfig):
        super().__init__()
        H = c.hidden
        self.hnorm = nn.Parameter(torch.ones(H))
        self.enorm = nn.Parameter(torch.ones(H))
        self.proj = nn.Parameter(torch.empty(H, 2 * H))
        self.block = Block(c)
        self.norm = nn.Parameter(torch.ones(H))

    def forward(self, h_prev: torch.Tensor, emb: torch.Tensor, cos, sin) -> torch.Tensor:
        x = torch.cat([rms_norm(h_prev, self.hnorm), rms_norm(emb, self.enorm)], dim=-1) @ self.proj.T
        return rms_norm(self.block(x, cos, sin), self.norm)


class TargetModel(nn.Module):
    def __init__(self, c: TargetConfig):
        super().__init__()
        self.config = c
        self.embed = nn.Parameter(torch.empty(c.vocab, c.hidden))
        self.layers = nn.ModuleList(Block(c) for _ in range(c.layers))
        self.norm = nn.Parameter(torch.ones(c.hidden))
        self.mtp = nn.ModuleList(MTPModule(c) for _ in range(c.mtp))
        rope = Rope(c.head_dim, c.rope_theta, "cpu")  # the engine's tables, so positions agree exactly
        self.register_buffer("rope_cos", rope.cos, persistent=False)
        self.register_buffer("rope_sin", rope.sin, persistent=False)

    def init_weights(self, std: float, generator: torch.Generator) -> None:
        """Normal(0, std) matrices; residual outputs (wo, w_down) scaled by 1/sqrt(2 x blocks); norms 1."""
        out_std = std / math.sqrt(2 * (self.config.layers + self.config.mtp))
        with torch.no_grad():
            for name, p in self.named_parameters():
                if p.ndim == 1:
                    p.fill_(1.0)
                else:
                    s = out_std if name.endswith(("wo", "w_down")) else std
                    p.copy_(torch.randn(p.shape, generator=generator) * s)

    def _tables(self, T: int):
        if T > self.rope_cos.shape[0]:
            raise ValueError(f"sequence of {T} tokens is beyond the RoPE table ({self.rope_cos.shape[0]})")
        return self.rope_cos[:T], self.rope_sin[:T]

    def hidden(self, ids: torch.Tensor) -> torch.Tensor:
        """ids (B, T) -> h^0 (B, T, H), after the final norm."""
        cos, sin = self._tables(ids.shape[1])
        x = self.embed[ids]
        for layer in self.layers:
            x = layer(x, cos, sin)
        return rms_norm(x, self.norm)

    def logits(self, h: torch.Tensor) -> torch.Tensor:
        return h @ self.embed.T

    def mtp_hidden(self, k: int, h_prev: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        """Module k (1-based) over the first T-k positions: h^{k-1} (B, >=T-k, H), ids (B, T) -> h^k (B, T-k, H)."""
        n = ids.shape[1] - k
        cos, sin = self._tables(n)
        return self.mtp[k - 1](h_prev[:, :n], self.embed[ids[:, k:k + n]], cos, sin)

    def losses(self, window: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """window (B, T+1) -> (main loss, [loss of MTP module k for k = 1..D]), mean cross-entropies."""
        ids, tgt = window[:, :-1], window[:, 1:]
        V = self.config.vocab
        h = self.hidden(ids)
        main = F.cross_entropy(self.logits(h).reshape(-1, V), tgt.reshape(-1))
        mtp = []
        for k in range(1, self.config.mtp + 1):
            h = self.mtp_hidden(k, h, ids)
            mtp.append(F.cross_entropy(self.logits(h).reshape(-1, V), tgt[:, k:].reshape(-1)))
        return main, mtp


def split_state(state: dict) -> tuple[dict, dict]:
    """(main model weights, MTP weights) of a TargetModel state dict."""
    main = {k: v for k, v in state.items() if not k.startswith("mtp.")}
    return main, {k: v for k, v in state.items() if k.startswith("mtp.")}


def engine_model(state: dict, config: TargetConfig, device="cpu", dtype=torch.float32, backend="torch",
                 check_values: bool = True) -> Model:
    """The engine's Model over the trained main weights (see the mapping in the module doc)."""
    t = lambda k: state[k].to(device, dtype).contiguous()  # noqa: E731
    layers = [Layer(*(t(f"layers.{i}.{key}") for key in LAYER_KEYS)) for i in range(config.layers)]
    return Model(config.spec(), t("embed"), layers, t("norm"), None, backend=backend, rope_theta=config.rope_theta,
                 check_values=check_values)


def load_target(path: Path = FAMILY_DIR / "target.pt", mtp_path: Path | None = None) -> tuple[TargetModel, dict]:
    """The trained TargetModel (with its MTP modules when mtp.pt sits beside target.pt) and the
    checkpoint's metadata (everything but the state dict)."""
    path = Path(path)
    ck = torch.load(path, map_location="cpu", weights_only=True)
    if ck.get("format") != FORMAT:
        raise ValueError(f"{path} is not a {FORMAT} checkpoint")
    cfg = _from_dict(TargetConfig, ck["model"])
    state = dict(ck["state_dict"])
    mtp_path = path.with_name("mtp.pt") if mtp_path is None else Path(mtp_path)
    if cfg.mtp and mtp_path.exists():
        state.update(torch.load(mtp_path, map_location="cpu", weights_only=True)["state_dict"])
    else:
        cfg = TargetConfig(**{**asdict(cfg), "mtp": 0})
    model = TargetModel(cfg)
    model.load_state_dict(state)
    return model, {k: v for k, v in ck.items() if k != "state_dict"}
