"""Logit warping: temperature, top-k and top-p (nucleus) filtering into probabilities.

Speculative sampling is exact with respect to whatever distribution the *target* produces, so the
same warp must be applied to the target logits and to the draft logits before verification (the
draft's warp only changes the acceptance rate, never the output law). ``warp`` is that one
function.

Order of operations (the common one, as in most serving stacks):

1. ``temperature``: logits are divided by it. ``temperature == 0`` is the greedy case and returns
   the one-hot distribution of the argmax (ties: the lowest index, as ``torch.argmax``);
   ``top_k``/``top_p`` are then irrelevant and ignored.
2. ``top_k``: keep the ``k`` largest logits; every logit equal to the k-th largest value is kept
   too, so ties at the boundary can keep more than ``k`` tokens. ``None`` or ``k >= V`` keeps all.
3. ``top_p``: on the distribution left after top-k, keep the smallest set of most probable
   tokens whose total probability is at least ``top_p`` (the most probable token is always kept;
   ties in probability are ordered by index, via a stable sort). ``None`` or ``1.0`` keeps all.
4. softmax over the kept logits; filtered tokens get probability exactly 0.

Computation is in float32 for half-precision inputs and in the input dtype otherwise.
"""
from __future__ import annotations

import torch

__all__ = ["warp"]


def warp(logits: torch.Tensor, temperature: float, top_k: int | None = None,
         top_p: float | None = None) -> torch.Tensor:
    """Turn ``logits`` (..., V) into probabilities (..., V) after temperature/top-k/top-p.

    ``temperature`` >= 0 (0 = greedy one-hot argmax); ``top_k`` >= 1 or None; ``top_p`` in
    (0, 1] or None. Works on any device; the result has the logits' device.
    """
    if not torch.is_floating_point(logits):
        raise TypeError("logits must be a floating-point tensor")
    if logits.dim() < 1 or logits.shape[-1] < 1:
        raise ValueError("logits must have a non-empty last (vocabulary) dimension")
    temperature = float(temperature)
    if not temperature >= 0.0:          # also rejects NaN
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    if top_k is not None and int(top_k) < 1:
        raise ValueError(f"top_k must be >= 1 or None, got {top_k}")
    if top_p is not None and not (0.0 < float(top_p) <= 1.0):
        raise ValueError(f"top_p must be in (0, 1] or None, got {top_p}")

    x = logits.float() if logits.dtype in (torch.float16, torch.bfloat16) else logits
    V = x.shape[-1]

    if temperature == 0.0:
        idx = torch.argmax(x, dim=-1, keepdim=True)
        return torch.zeros_like(x).scatter_(-1, idx, 1.0)

    x = x / temperature
    neg_inf = torch.tensor(float("-inf"), dtype=x.dtype, device=x.device)

    if top_k is not None and int(top_k) < V:
        kth = torch.topk(x, int(top_k), dim=-1).values[..., -1:]
        x = torch.where(x < kth, neg_inf, x)

    if top_p is not None and float(top_p) < 1.0:
        probs = torch.softmax(x, dim=-1)
        sorted_p, order = torch.sort(probs, dim=-1, descending=True, stable=True)
        csum = torch.cumsum(sorted_p, dim=-1)
        mass_before = torch.cat([torch.zeros_like(csum[..., :1]), csum[..., :-1]], dim=-1)
        drop_sorted = mass_before >= float(top_p)
        drop_sorted[..., 0] = False                                # always keep the top token
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        x = torch.where(drop, neg_inf, x)

    return torch.softmax(x, dim=-1)
