"""RMSNorm (Zhang & Sennrich 2019): y = x / sqrt(mean(x², -1) + eps) * weight, computed in fp32
and returned in x's dtype (the weight is applied in fp32 too, before the one rounding).

``rms_norm`` checks its arguments and dispatches; ``rms_norm_ref`` is the torch reference (the
CPU default), ``rms_norm_triton`` the Triton launcher (one program per row).
"""
from __future__ import annotations

import math

import torch

from kernels.backend import BACKENDS, TritonKernel

__all__ = ["rms_norm", "rms_norm_ref", "rms_norm_triton", "check_rms_norm_args"]

tl = None  # bound to triton.language on the first Triton launch (kernels.backend.TritonKernel)

_MAX_ONE_PASS = 8192  # wider rows loop over blocks (two passes over the row)


def rms_norm_ref(x, weight, eps: float) -> torch.Tensor:
    xf = x.float()
    y = xf * torch.rsqrt(xf.square().mean(-1, keepdim=True) + eps) * weight.float()
    return y.to(x.dtype)


def _rms_norm_kernel(
    x_ptr, w_ptr, y_ptr, stride_xn, stride_yn, n_cols, eps,
    BLOCK: tl.constexpr, ONE_PASS: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_xn
    y_row = y_ptr + row * stride_yn
    offs = tl.arange(0, BLOCK)
    if ONE_PASS:
        mask = offs < n_cols
        x = tl.load(x_row + offs, mask=mask, other=0.0).to(tl.float32)
        rstd = 1.0 / tl.sqrt_rn(tl.sum(x * x, 0) / n_cols + eps)
        w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_row + offs, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)
    else:
        ss = tl.full((BLOCK,), 0.0, tl.float32)
        for start in range(0, n_cols, BLOCK):
            mask = start + offs < n_cols
            x = tl.load(x_row + start + offs, mask=mask, other=0.0).to(tl.float32)
            ss += x * x
        rstd = 1.0 / tl.sqrt_rn(tl.sum(ss, 0) / n_cols + eps)
        for start in range(0, n_cols, BLOCK):
            mask = start + offs < n_cols
            x = tl.load(x_row + start + offs, mask=mask, other=0.0).to(tl.float32)
            w = tl.load(w_ptr + start + offs, mask=mask, other=0.0).to(tl.float32)
            tl.store(y_row + start + offs, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


_kernel = TritonKernel(_rms_norm_kernel)


def rms_norm_triton(x, weight, eps: float, *, block: int | None = None) -> torch.Tensor:
    N, C = x.shape
    y = torch.empty((N, C), dtype=x.dtype, device=x.device)
    if N == 0 or C == 0:
        return y
    if block is None:
        block = min(1 << max(0, C - 1).bit_length(), _MAX_ONE_PASS)
    if block < 1 or block & (block - 1):
        raise ValueError(f"block must be a power of two, got {block}")
    _kernel(x.device)[(N,)](
        x, weight, y, x.stride(0), y.stride(0), C, float(eps),
        BLOCK=block, ONE_PASS=block >= C, num_warps=4 if block <= 2048 else 8,
    )
    return y


def _need(cond: bool, msg: str) -> None:
    if not cond:
        raise ValueError(f"rms_norm: {msg}")


def check_rms_norm_args(x, weight, eps) -> None:
    _need(isinstance(x, torch.Tensor), f"x must be a torch.Tensor, got {type(x).__name__}")
    _need(isinstance(weight, torch.Tensor), f"weight must be a torch.Tensor, got {type(weight).__name__}")
    _need(x.ndim == 2, f"x must be (N, hidden), got shape {tuple(x.shape)}")
    _need(weight.ndim == 1 and weight.shape[0] == x.shape[1],
          f"weight must be (hidden,) = ({x.shape[1]},), got {tuple(weight.shape)}")
    _need(x.dtype.is_floating_point and weight.dtype.is_floating_point,
          f"x and weight must be floating point, got {x.dtype} and {weight.dtype}")
    _need(x.stride(-1) == 1, f"x must be contiguous in its last dim, got strides {x.stride()}")
    _need(weight.stride(0) == 1 or weight.shape[0] <= 1, "weight must be contiguous")
    _need(x.device == weight.device, f"x on {x.device} but weight on {weight.device}")
    _need(isinstance(eps, (int, float)) and math.isfinite(eps) and eps >= 0,
          f"eps must be a finite float >= 0, got {eps!r}")


def rms_norm(x, weight, eps: float, *, backend: str = "torch") -> torch.Tensor:
    """x (N, hidden), weight (hidden,) -> (N, hidden) in x's dtype."""
    check_rms_norm_args(x, weight, eps)
    if backend == "torch":
        return rms_norm_ref(x, weight, eps)
    if backend == "triton":
        return rms_norm_triton(x, weight, eps)
    raise ValueError(f"unknown kernel backend {backend!r}: expected one of {BACKENDS}")
