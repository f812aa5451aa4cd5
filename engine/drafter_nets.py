"""The family's drafters as training-time modules, trained against the frozen target
(engine/train_drafters.py) and loaded by the engine's planners (engine/drafters.py).

* EAGLE head (Li et al. 2024, arXiv:2401.15077): one decoder layer over the target's top feature
  h_i (after the final norm, what the LM head reads) and the embedding of the next token t_{i+1}:
      x = proj [RMSNorm(h_i) * hnorm ; RMSNorm(E t_{i+1}) * enorm],  f_{i+1} = RMSNorm(Block(x)) * norm
  f_{i+1} regresses h_{i+1}; its logits f E^T (the target's tied head) predict t_{i+2}. Drafting
  feeds f back as the next h. It has exactly an MTP module's shape (engine/target.py
  `MTPModule`), so one engine class runs both.
* Medusa heads (Cai et al. 2024, arXiv:2401.10774): head k (1-based) maps h_i to
  h_i + SiLU(W_k h_i + b_k) and reads it with the target's head, predicting t_{i+k+1}. W_k
  starts at zero (Medusa §2.1.1: the head starts as the base model's own prediction).
* The draft model: an independent Llama-style model (engine/target.py `TargetModel` with no MTP),
  1 layer, hidden 128, its own tied embedding.

All three learn the target's own next-token distribution (distillation on the corpus), which is
what acceptance measures.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torch import nn

from engine.target import MTPModule, TargetConfig, TargetModel

MEDUSA_HEADS = 4
DRAFT_CONFIG = TargetConfig(name="tiny-draft", layers=1, hidden=128, heads=2, kv_heads=1, head_dim=64, ffn=384,
                            vocab=4096, mtp=0)


class MedusaHeads(nn.Module):
    def __init__(self, hidden: int, heads: int = MEDUSA_HEADS):
        super().__init__()
        self.w = nn.Parameter(torch.zeros(heads, hidden, hidden))  # (K, H_out, H_in)
        self.b = nn.Parameter(torch.zeros(heads, hidden))  # (K, H)

    @property
    def heads(self) -> int:
        return self.w.shape[0]

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        """h (..., H) -> (K, ..., H): every head's hidden state."""
        z = torch.einsum("koi,...i->k...o", self.w, h)  # (K, ..., H)
        b = self.b.view(self.heads, *([1] * (h.ndim - 1)), -1)
        return h.unsqueeze(0) + F.silu(z + b)


@dataclass(frozen=True)
class DrafterSet:
    eagle: MTPModule
    medusa: MedusaHeads
    draft: TargetModel


def draft_config(target: TargetConfig) -> TargetConfig:
    """The draft model's shape for a target: DRAFT_CONFIG on the target's vocabulary."""
    return replace(DRAFT_CONFIG, vocab=target.vocab)


def new_drafters(target: TargetConfig, generator: torch.Generator, std: float = 0.02) -> DrafterSet:
    eagle = MTPModule(target)
    draft = TargetModel(draft_config(target))
    draft.init_weights(std, generator)
    with torch.no_grad():
        for name, p in eagle.named_parameters():
            if p.ndim == 1:
                p.fill_(1.0)
            else:
                p.copy_(torch.randn(p.shape, generator=generator) * (std / 2 if name.endswith(("wo", "w_down")) else std))
    return DrafterSet(eagle=eagle, medusa=MedusaHeads(target.hidden), draft=draft)
