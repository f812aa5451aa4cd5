"""The drafters' weights at inference, over the engine's Model (engine/model.py).

* `FeatureHead`: an MTP module (DeepSeek-V3) or the EAGLE head, which share one shape
  (engine/drafter_nets.py): x = proj [RMSNorm(h) * hnorm ; RMSNorm(E t) * enorm], then one decoder
  layer over the drafter's own KV, a final RMSNorm and the target's tied LM head. It is a 1-layer
  engine `Model` fed with `inputs` = x.
* `MedusaHeads`: K residual heads h -> h + SiLU(W_k h + b_k), read with the target's LM head.
* The draft model is a plain engine `Model` of its own shape.

`family_drafters` loads the trained ones (engine/family); `random_drafters` draws seeded random
ones of the same shapes for random-weight targets (correctness checks, step-time grids).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import torch
import torch.nn.functional as F

from engine.model import NORM_EPS, Layer, Model
from engine.target import LAYER_KEYS, TargetConfig, engine_model
from sim.models import ModelSpec


def _norm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return F.rms_norm(x, (x.shape[-1],), w, NORM_EPS)


class FeatureHead:
    def __init__(self, target: Model, hnorm, enorm, proj, layer: Layer, norm):
        self.target = target
        self.hnorm, self.enorm, self.proj = hnorm, enorm, proj  # (H,), (H,), (H, 2H)
        spec = replace(target.spec, name=f"{target.spec.name}-head", layers=1, mtp_modules=0)
        self.model = Model(spec, target.embed, [layer], norm, None, backend=target.backend,
                           rope_theta=target.rope_theta, check_values=False)

    @staticmethod
    def from_state(target: Model, state: dict, prefix: str = "") -> "FeatureHead":
        t = lambda k: state[prefix + k].to(target.device, target.dtype).contiguous()  # noqa: E731
        layer = Layer(*(t(f"block.{k}") for k in LAYER_KEYS))
        return FeatureHead(target, t("hnorm"), t("enorm"), t("proj"), layer, t("norm"))

    @staticmethod
    def random(target: Model, g: torch.Generator) -> "FeatureHead":
        s = target.spec
        H = s.hidden
        one = Model.random(replace(s, layers=1), int(torch.randint(0, 2**31, (1,), generator=g)),
                           device=target.device, dtype=target.dtype, backend=target.backend,
                           rope_theta=target.rope_theta)
        proj = (torch.randn((H, 2 * H), generator=g) * (2 * H) ** -0.5).to(target.device, target.dtype)
        ones = torch.ones(H, device=target.device, dtype=target.dtype)
        return FeatureHead(target, ones, ones.clone(), proj, one.layers[0], one.norm)

    def inputs(self, h: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        """h (N, H) features, tokens (N,) -> the layer's inputs (N, H)."""
        e = self.target.embed[tokens]
        return torch.cat([_norm(h, self.hnorm), _norm(e, self.enorm)], dim=-1) @ self.proj.T


class MedusaHeads:
    def __init__(self, target: Model, w: torch.Tensor, b: torch.Tensor):
        self.target = target
        self.w, self.b = w, b  # (K, H, H), (K, H)

    @property
    def heads(self) -> int:
        return self.w.shape[0]

    def logits(self, h: torch.Tensor) -> torch.Tensor:
        """h (B, H) -> (K, B, V): head k's logits for the token k+1 places after the next."""
        z = torch.einsum("koi,bi->kbo", self.w, h) + self.b[:, None, :]
        return ((h.unsqueeze(0) + F.silu(z)) @ self.target.lm_head.T).float()


@dataclass
class Drafters:
    """Whatever a family provides (None: not available)."""

    eagle: FeatureHead | None
    medusa: MedusaHeads | None
    draft: Model | None
    mtp: list[FeatureHead]

    def feature_heads(self) -> list[FeatureHead]:
        """The EAGLE head and MTP modules there are."""
        return [h for h in [self.eagle, *self.mtp] if h is not None]

    def pass_models(self) -> list[Model]:
        """The models the drafters run forward passes of (Medusa's heads are no pass)."""
        return [h.model for h in self.feature_heads()] + ([self.draft] if self.draft is not None else [])


def family_drafters(target: Model, family_dir: Path) -> Drafters:
    def load(name):
        p = family_dir / name
        return torch.load(p, map_location="cpu", weights_only=True) if p.exists() else None

    eagle, medusa, draft, mtp = load("eagle.pt"), load("medusa.pt"), load("draft.pt"), load("mtp.pt")
    dev, dt = target.device, target.dtype
    modules = []
    if mtp is not None:
        keys = sorted({int(k.split(".")[1]) for k in mtp["state_dict"]})
        modules = [FeatureHead.from_state(target, mtp["state_dict"], f"mtp.{k}.") for k in keys]
    return Drafters(
        eagle=FeatureHead.from_state(target, eagle["state_dict"]) if eagle else None,
        medusa=MedusaHeads(target, medusa["state_dict"]["w"].to(dev, dt), medusa["state_dict"]["b"].to(dev, dt))
        if medusa else None,
        draft=engine_model(draft["state_dict"], TargetConfig(**draft["model"]), device=dev, dtype=dt,
                           backend=target.backend, check_values=False) if draft else None,
        mtp=modules)


def draft_spec(target: ModelSpec) -> ModelSpec:
    """A random target's draft model: 1 layer, half the width (at least 64), its vocabulary."""
    H = max(64, target.hidden // 2)
    d = min(target.head_dim, H)
    return replace(target, name=f"{target.name}-draft", layers=1, hidden=H, heads=max(1, H // d), kv_heads=1,
                   head_dim=d, ffn=max(64, target.ffn // 2), mtp_modules=0)


def random_drafters(target: Model, seed: int, medusa_heads: int = 4, mtp_modules: int = 2) -> Drafters:
    g = torch.Generator().manual_seed(seed)
    H = target.spec.hidden
    w = (torch.randn((medusa_heads, H, H), generator=g) * H ** -0.5).to(target.device, target.dtype)
    b = torch.zeros((medusa_heads, H), device=target.device, dtype=target.dtype)
    draft = Model.random(draft_spec(target.spec), seed + 1, device=target.device, dtype=target.dtype,
                         backend=target.backend, check_values=False)
    return Drafters(eagle=FeatureHead.random(target, g), medusa=MedusaHeads(target, w, b), draft=draft,
                    mtp=[FeatureHead.random(target, g) for _ in range(mtp_modules)])
