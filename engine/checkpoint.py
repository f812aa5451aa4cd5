"""Where the engine's model comes from: the trace's `engine:` section (DESIGN.md §4).

`engine.checkpoint` is
* a trained family name: `tiny` (engine/family: the target trained by engine/train.py on the
  stdlib + Shakespeare corpus, its MTP modules, and the drafters engine/train_drafters.py trained
  against it: EAGLE head, Medusa heads, draft model). Prompts then come from the
  family's committed held-out prompt sets, `engine.prompts: code | text` (default code), or
* a mapping `{random_shape: <model preset | model file | mapping>, layers: n, hidden: .., heads: ..,
  kv_heads: .., head_dim: .., ffn: .., vocab: .., tied_embeddings: .., seed: ..}`: random weights
  of a real shape scaled down to fit; a key left out keeps the shape's value; `seed` defaults to
  the trace's seed;
* absent: a random model of the trace's own `model:` shape with its layers cut to 2 (at most),
  seeded by the trace's seed. A small default that runs everywhere; say `checkpoint:` to choose.

Random models read prompts from `engine.prompts` (seeded by the trace seed and request id).
Weights and KV are fp32 on the CPU, bf16 on CUDA.
`engine.backend`: torch | triton (default: triton on CUDA when installed, torch otherwise);
`engine.device`: cpu | cuda (default: cuda when a GPU is present, else cpu). Random models get
seeded random drafters of the same shapes (engine/drafting/heads.py). The engine ignores
`hardware:` except to price steps in the report (the simulator's cost model, for comparison).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

import torch

from kernels.backend import BACKENDS, default_backend, interpreter_active, triton_available
from sim.models import ModelSpec, model_from_node
from sim.spec import TraceSpec
from sim.specio import Node

FAMILIES = {"tiny": "target.pt"}  # trained families: name -> checkpoint in engine/family (engine/train.py)
PROMPT_DOMAINS = ("code", "text")
DEFAULT_LAYERS = 2
SHAPE_KEYS = ("layers", "hidden", "heads", "kv_heads", "head_dim", "ffn", "vocab")
_KEYS = ("random_shape",) + SHAPE_KEYS + ("tied_embeddings", "seed")


@dataclass(frozen=True)
class ModelSource:
    """What the engine will build: a shape, random weights from a seed, on a device, with kernels."""

    spec: ModelSpec  # the model actually run (fp32 on CPU: bytes_per_weight 4)
    seed: int
    device: str
    backend: str
    dtype: torch.dtype
    description: str
    family: str | None = None  # a trained family, else random weights
    domain: str = "code"  # the family's held-out prompt set

    def build(self):
        if self.family is not None:
            from engine.target import engine_model, load_target
            target, _ = load_target(_family_path(self.family))
            return engine_model(target.state_dict(), target.config, device=self.device, dtype=self.dtype,
                                backend=self.backend)
        from engine.model import Model
        return Model.random(self.spec, self.seed, device=self.device, dtype=self.dtype, backend=self.backend)

    def drafters_for(self, model, schemes):
        """drafters(model) if any of `schemes` drafts with a model, else None."""
        return self.drafters(model) if any(s.name not in ("none", "ngram") for s in schemes) else None

    def drafters(self, model):
        """The drafters' weights: a family's trained ones, or seeded random ones of the same shapes
        for a random model (engine/drafting/heads.py)."""
        from engine.drafting.heads import family_drafters, random_drafters
        if self.family is not None:
            return family_drafters(model, _family_path(self.family).parent)
        return random_drafters(model, self.seed + 1)

    @property
    def prompts(self):
        """prompts(request id, length) -> token ids for a family; None: the runner's seeded stream."""
        if self.family is None:
            return None
        return lambda request_id, length: family_prompt(self.domain, request_id, length)

    def to_dict(self) -> dict:
        out = {"checkpoint": self.description, "seed": self.seed, "device": self.device, "backend": self.backend,
               "dtype": str(self.dtype).removeprefix("torch.")}
        if self.family is not None:
            out["prompts"] = self.domain
        return out


def _engine_node(trace: TraceSpec) -> Node:
    node = trace.engine.node
    return node if node is not None else Node({}, str(trace.path), "engine")


def resolve(trace: TraceSpec) -> ModelSource:
    """Read and check the trace's engine section; raises SpecError at the offending key."""
    node = _engine_node(trace)
    f = node.mapping(("checkpoint", "backend", "device", "prompts"))
    device = _device(f.get("device"))
    backend = _backend(f.get("backend"), device)
    dtype = engine_dtype(device)
    seed = trace.seed
    if "checkpoint" not in f or f["checkpoint"].value is None:
        spec = trace.model
        where = Node(None, node.file, f"{node.path}.checkpoint" if node.path else "engine.checkpoint")
        _dense(spec, where, "the trace's model")
        spec = replace(spec, name=f"{spec.name}-random-{min(spec.layers, DEFAULT_LAYERS)}l",
                       layers=min(spec.layers, DEFAULT_LAYERS))
        desc = f"random {spec.name} (default: the trace's model cut to {DEFAULT_LAYERS} layers)"
    else:
        ck = f["checkpoint"]
        if isinstance(ck.value, str):
            if ck.value not in FAMILIES:
                raise ck.error(f"unknown checkpoint family '{ck.value}'; available trained families: "
                               f"{', '.join(FAMILIES)} (or a mapping such as {{random_shape: llama-3.2-1b, layers: 2}})")
            spec = _family_spec(ck)
            domain = f["prompts"].string(PROMPT_DOMAINS) if "prompts" in f else "code"
            width = float(dtype.itemsize)
            return ModelSource(spec=replace(spec, bytes_per_weight=width, bytes_per_kv=width), seed=seed, device=device,
                               backend=backend, dtype=dtype, description=f"family {ck.value} (engine/family/{FAMILIES[ck.value]})",
                               family=ck.value, domain=domain)
        spec, seed = _random(ck, trace)
        desc = f"random {spec.name}"
    if "prompts" in f:
        raise f["prompts"].error("prompt sets belong to a trained family (engine.checkpoint: tiny); "
                                 "random models read a seeded token stream")
    width = float(dtype.itemsize)  # bytes a weight and a KV element take
    spec = replace(spec, bytes_per_weight=width, bytes_per_kv=width)
    return ModelSource(spec=spec, seed=seed, device=device, backend=backend, dtype=dtype, description=desc)


def _family_path(name: str):
    from engine.corpus import FAMILY_DIR
    return FAMILY_DIR / FAMILIES[name]


def _family_spec(ck: Node) -> ModelSpec:
    """The family's shape, read from its checkpoint's config."""
    from engine.target import TargetConfig
    path = _family_path(ck.value)
    try:
        meta = torch.load(path, map_location="cpu", weights_only=True)
    except (OSError, RuntimeError) as exc:
        raise ck.error(f"cannot read the family's checkpoint {path}: {exc}") from None
    return TargetConfig(**meta["model"]).spec()


@lru_cache(maxsize=4)
def _prompt_set(domain: str) -> tuple[tuple[tuple[int, ...], ...], int]:
    """(the domain's held-out prompts, the <|endoftext|> id)."""
    from engine.corpus import load_prompts
    from engine.tokenizer import load_tokenizer
    return tuple(tuple(p) for p in load_prompts(domain)), load_tokenizer().eot


def family_prompt(domain: str, request_id: int, length: int) -> list[int]:
    """Request i reads held-out prompt i mod n of the domain, continued by the next ones
    (separated by <|endoftext|>) when the workload asks for more tokens than one holds."""
    prompts, eot = _prompt_set(domain)
    out: list[int] = []
    i = request_id % len(prompts)
    while len(out) < length:
        if out:
            out.append(eot)
        out.extend(prompts[i])
        i = (i + 1) % len(prompts)
    return out[:length]


def _random(ck: Node, trace: TraceSpec) -> tuple[ModelSpec, int]:
    f = ck.mapping(_KEYS, required=("random_shape",))
    base = model_from_node(f["random_shape"], trace.base_dir)
    _dense(base, f["random_shape"], f"random_shape '{base.name}'")
    changes = {k: f[k].integer(lo=1, hi=1_000_000) for k in SHAPE_KEYS if k in f}
    if "tied_embeddings" in f:
        changes["tied_embeddings"] = f["tied_embeddings"].boolean()
    seed = f["seed"].integer(lo=0, hi=2**63 - 1) if "seed" in f else trace.seed
    spec = replace(base, **changes)
    if changes:
        spec = replace(spec, name=f"{base.name}-scaled")
    if spec.heads % spec.kv_heads:
        raise ck.error(f"heads ({spec.heads}) must be a multiple of kv_heads ({spec.kv_heads})")
    if spec.head_dim % 2:
        raise (f["head_dim"] if "head_dim" in f else ck).error(f"head_dim must be even (RoPE), got {spec.head_dim}")
    if spec.params_total > 50e9:
        raise ck.error(f"{spec.params_total / 1e9:.1f}B parameters is too large to build with random weights; "
                       "scale it down (layers, hidden, ffn, vocab)")
    return spec, seed


def _dense(spec: ModelSpec, node: Node, what: str) -> None:
    if spec.experts or spec.attention != "mha":
        kind = "a mixture-of-experts" if spec.experts else "an MLA"
        raise node.error(f"{what} is {kind} model; the engine builds dense Llama-style models only "
                         "(give engine.checkpoint: {random_shape: <a dense preset>, ...})")


def engine_dtype(device: str) -> torch.dtype:
    """The width the engine runs at on `device`: float32 on a CPU, bfloat16 on a GPU."""
    return torch.float32 if device == "cpu" else torch.bfloat16


def _device(node: Node | None) -> str:
    if node is None:
        return "cuda" if torch.cuda.is_available() else "cpu"
    dev = node.string(("cpu", "cuda"))
    if dev == "cuda" and not torch.cuda.is_available():
        raise node.error("cuda requested but no GPU is available here (torch.cuda.is_available() is False); "
                         "use device: cpu")
    return dev


def _backend(node: Node | None, device: str) -> str:
    if node is None:
        return default_backend(device)
    name = node.string(BACKENDS)
    if name == "triton":
        if not triton_available():
            raise node.error("triton is not installed; use backend: torch")
        if device == "cpu" and not interpreter_active():
            raise node.error("triton on the CPU runs only in its interpreter: set TRITON_INTERPRET=1 in the "
                             "environment, or use backend: torch")
    return name
