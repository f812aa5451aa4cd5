"""Model specs: the shapes that the cost model prices and the engine builds (DESIGN.md §3).

Parameter counts are derived from the shapes, never typed in: a Llama-style layer has
q/o projections of hidden x heads*head_dim, k/v of hidden x kv_heads*head_dim and a SwiGLU FFN
of 3 x hidden x ffn; DeepSeek-V3's MLA and MoE follow arXiv:2412.19437 §2.1.
"""
from __future__ import annotations

from dataclasses import dataclass, fields, replace
from pathlib import Path

from sim.specio import Node, is_file, load_yaml

PRESETS = Path(__file__).with_name("presets") / "models.yaml"


@dataclass(frozen=True)
class ModelSpec:
    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int  # dense FFN intermediate size
    vocab: int
    tied_embeddings: bool = False
    attention: str = "mha"  # mha (incl. GQA) | mla
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    rope_dim: int = 0
    experts: int = 0  # routed experts; 0 = dense model
    active_experts: int = 0
    shared_experts: int = 0
    expert_ffn: int = 0
    dense_layers: int = 0  # leading dense layers of a MoE model
    bytes_per_weight: float = 2.0
    bytes_per_kv: float = 2.0
    mtp_modules: int = 0

    # ---- derived shapes -----------------------------------------------------------------
    @property
    def moe_layers(self) -> int:
        return self.layers - self.dense_layers if self.experts else 0

    @property
    def attn_params(self) -> int:
        """Attention weights of one layer."""
        h, nh, d = self.hidden, self.heads, self.head_dim
        if self.attention == "mla":
            qk = d + self.rope_dim
            q = h * self.q_lora_rank + self.q_lora_rank * nh * qk if self.q_lora_rank else h * nh * qk
            kv = h * (self.kv_lora_rank + self.rope_dim) + self.kv_lora_rank * nh * 2 * d
            return q + kv + nh * d * h
        return 2 * h * nh * d + 2 * h * self.kv_heads * d

    @property
    def dense_ffn_params(self) -> int:
        return 3 * self.hidden * self.ffn

    @property
    def expert_params(self) -> int:
        return 3 * self.hidden * self.expert_ffn

    @property
    def embed_params(self) -> int:
        return self.vocab * self.hidden

    @property
    def head_params(self) -> int:
        """The LM head (shared with the embedding when tied)."""
        return self.vocab * self.hidden

    @property
    def layer_params(self) -> int:
        """All transformer-layer weights (attention + FFN/experts), summed over layers."""
        dense = (self.layers - self.moe_layers) * (self.attn_params + self.dense_ffn_params)
        moe = self.moe_layers * (self.attn_params + (self.experts + self.shared_experts) * self.expert_params)
        return dense + moe

    @property
    def params_total(self) -> int:
        emb = self.embed_params if self.tied_embeddings else self.embed_params + self.head_params
        return self.layer_params + emb

    @property
    def params_active(self) -> int:
        """Weights one token touches (embedding lookup excluded; the LM head included)."""
        dense = (self.layers - self.moe_layers) * (self.attn_params + self.dense_ffn_params)
        moe = self.moe_layers * (self.attn_params + (self.active_experts + self.shared_experts) * self.expert_params)
        return dense + moe + self.head_params

    @property
    def weight_bytes(self) -> float:
        return self.params_total * self.bytes_per_weight

    @property
    def kv_elems_per_token_layer(self) -> int:
        if self.attention == "mla":
            return self.kv_lora_rank + self.rope_dim  # compressed latent + decoupled rope key
        return 2 * self.kv_heads * self.head_dim

    @property
    def kv_bytes_per_token(self) -> float:
        """KV bytes one token holds across all layers."""
        return self.kv_elems_per_token_layer * self.bytes_per_kv * self.layers

    @property
    def attn_flops_per_pair(self) -> float:
        """FLOPs per (query, key) pair per layer: QK^T plus PV (MLA in its absorbed form)."""
        if self.attention == "mla":
            return 2 * self.heads * ((self.kv_lora_rank + self.rope_dim) + self.kv_lora_rank)
        return 4 * self.heads * self.head_dim

    def to_dict(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d.update(params_total=self.params_total, params_active=self.params_active,
                 kv_bytes_per_token=self.kv_bytes_per_token)
        return d

    def scaled(self, **changes) -> "ModelSpec":
        return replace(self, **changes)


_INT_KEYS = ("layers", "hidden", "heads", "kv_heads", "head_dim", "ffn", "vocab", "q_lora_rank",
             "kv_lora_rank", "rope_dim", "experts", "active_experts", "shared_experts", "expert_ffn",
             "dense_layers", "mtp_modules")
_REQUIRED = ("layers", "hidden", "heads", "kv_heads", "head_dim", "ffn", "vocab")
_KEYS = ("preset", "name", "tied_embeddings", "attention", "bytes_per_weight", "bytes_per_kv") + _INT_KEYS
_REGISTRY: dict[str, "ModelSpec"] = {}  # filled by trained families (engine) through register_model


def register_model(spec: ModelSpec) -> None:
    """A trained family registers its shape so traces may name it as `model:`."""
    _REGISTRY[spec.name] = spec


def preset_names() -> list[str]:
    return list(load_yaml(PRESETS, "model presets")) + list(_REGISTRY)


def model_from_node(node: Node, base_dir: Path, _seen: tuple[Path, ...] = ()) -> ModelSpec:
    """A preset name, a path to a YAML model file, or a mapping (optionally starting from `preset:`)."""
    if isinstance(node.value, str):
        name = node.value
        if name in _REGISTRY:
            return _REGISTRY[name]
        presets = load_yaml(PRESETS, "model presets")
        if name in presets:
            return _build(Node(presets[name], str(PRESETS), name), name, base_dir)
        path = base_dir / name
        if is_file(path):
            if path.resolve() in _seen:
                raise node.error(f"`preset:` cycle: model file {path} is already being read")
            return _build(Node(load_yaml(path, "model file"), str(path), ""), path.stem, path.parent,
                          _seen + (path.resolve(),))
        if name.endswith((".yaml", ".yml")):
            raise node.error(f"model file not found: {path}")
        raise node.error(f"unknown model preset '{name}'; expected one of: {', '.join(preset_names())} or a path to a YAML model")
    return _build(node, "custom", base_dir, _seen)


def _build(node: Node, name: str, base_dir: Path, _seen: tuple[Path, ...] = ()) -> ModelSpec:
    f = node.mapping(_KEYS)
    values: dict = {}
    if "preset" in f:
        base = model_from_node(f["preset"], base_dir, _seen)
        values = {fl.name: getattr(base, fl.name) for fl in fields(base)}
        name = base.name if len(f) == 1 else f"{base.name}+custom"
    else:
        for key in _REQUIRED:
            if key not in f:
                raise node.error(f"missing required key '{key}' (or start from `preset:`)")
    values["name"] = f["name"].string() if "name" in f else name
    for key in _INT_KEYS:
        if key in f:
            values[key] = f[key].integer(lo=0 if key not in _REQUIRED else 1, hi=10_000_000)
    if "tied_embeddings" in f:
        values["tied_embeddings"] = f["tied_embeddings"].boolean()
    if "attention" in f:
        values["attention"] = f["attention"].string(("mha", "mla"))
    for key in ("bytes_per_weight", "bytes_per_kv"):
        if key in f:
            values[key] = f[key].number(lo=0.125, hi=8)
    spec = ModelSpec(**values)
    _validate(spec, node)
    return spec


def _validate(m: ModelSpec, node: Node) -> None:
    if m.heads % m.kv_heads:
        raise node.error(f"heads ({m.heads}) must be a multiple of kv_heads ({m.kv_heads})")
    if m.experts and not (1 <= m.active_experts <= m.experts and m.expert_ffn >= 1):
        raise node.error("a MoE model needs 1 <= active_experts <= experts and expert_ffn >= 1")
    if m.dense_layers > m.layers:
        raise node.error(f"dense_layers ({m.dense_layers}) exceeds layers ({m.layers})")
    if m.attention == "mla" and m.kv_lora_rank < 1:
        raise node.error("attention: mla needs kv_lora_rank >= 1")
    if m.params_total > 1e14:
        raise node.error(f"model of {m.params_total:.3g} parameters is beyond any device this simulator models")
