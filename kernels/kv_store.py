"""KV store: scatter this step's keys and values into their slots of the paged KV cache.

The cache of a layer is (num_slots, n_kv_heads, head_dim) with slot = page_id * page_size +
offset (the engine views its (num_pages, page_size, n_kv, d) tensor flat). Token i's k[i], v[i]
go to k_cache[slots[i]], v_cache[slots[i]], in place; the slots are distinct.

``store_kv`` checks its arguments and dispatches; ``store_kv_ref`` is the torch reference (the
CPU default), ``store_kv_triton`` the Triton launcher (one program per token).
"""
from __future__ import annotations

import torch

from kernels.backend import BACKENDS, TritonKernel

__all__ = ["store_kv", "store_kv_ref", "store_kv_triton", "check_store_kv_args"]

tl = None  # bound to triton.language on the first Triton launch (kernels.backend.TritonKernel)


def store_kv_ref(k_cache, v_cache, k, v, slots) -> None:
    idx = slots.long()
    k_cache.index_copy_(0, idx, k)
    v_cache.index_copy_(0, idx, v)


def _store_kv_kernel(
    k_ptr, v_ptr, kc_ptr, vc_ptr, slots_ptr,
    stride_kn, stride_kh, stride_vn, stride_vh,
    stride_kcn, stride_kch, stride_vcn, stride_vch,
    H, D,
    H_PAD: tl.constexpr, D_PAD: tl.constexpr,
):
    i = tl.program_id(0).to(tl.int64)
    slot = tl.load(slots_ptr + i).to(tl.int64)
    offs_h = tl.arange(0, H_PAD)
    offs_d = tl.arange(0, D_PAD)
    mask = (offs_h < H)[:, None] & (offs_d < D)[None, :]                   # (H_PAD, D_PAD)
    k = tl.load(k_ptr + i * stride_kn + offs_h[:, None] * stride_kh + offs_d[None, :], mask=mask)
    v = tl.load(v_ptr + i * stride_vn + offs_h[:, None] * stride_vh + offs_d[None, :], mask=mask)
    tl.store(kc_ptr + slot * stride_kcn + offs_h[:, None] * stride_kch + offs_d[None, :],
             k.to(kc_ptr.dtype.element_ty), mask=mask)
    tl.store(vc_ptr + slot * stride_vcn + offs_h[:, None] * stride_vch + offs_d[None, :],
             v.to(vc_ptr.dtype.element_ty), mask=mask)


_kernel = TritonKernel(_store_kv_kernel)


def store_kv_triton(k_cache, v_cache, k, v, slots) -> None:
    N, H, D = k.shape
    if N == 0:
        return
    _kernel(k.device)[(N,)](
        k, v, k_cache, v_cache, slots,
        k.stride(0), k.stride(1), v.stride(0), v.stride(1),
        k_cache.stride(0), k_cache.stride(1), v_cache.stride(0), v_cache.stride(1),
        H, D,
        H_PAD=1 << max(0, H - 1).bit_length(), D_PAD=1 << max(0, D - 1).bit_length(),
    )


def _need(cond: bool, msg: str) -> None:
    if not cond:
        raise ValueError(f"store_kv: {msg}")


def check_store_kv_args(k_cache, v_cache, k, v, slots, check_values: bool | None = None) -> None:
    """Raise ValueError unless the arguments satisfy the contract. Shapes, dtypes, devices and
    strides are always checked; slot values (in range, distinct) by default only on CPU."""
    for name, t in (("k_cache", k_cache), ("v_cache", v_cache), ("k", k), ("v", v)):
        _need(isinstance(t, torch.Tensor), f"{name} must be a torch.Tensor, got {type(t).__name__}")
        _need(t.ndim == 3, f"{name} must be 3-D, got shape {tuple(t.shape)}")
        _need(t.dtype.is_floating_point, f"{name} must be floating point, got {t.dtype}")
        _need(t.stride(-1) == 1, f"{name} must be contiguous in its last dim, got strides {t.stride()}")
    S, H, D = k_cache.shape
    _need(tuple(v_cache.shape) == (S, H, D),
          f"v_cache shape {tuple(v_cache.shape)} != k_cache shape {tuple(k_cache.shape)}")
    N = k.shape[0]
    _need(tuple(k.shape) == (N, H, D), f"k must be (N, n_kv={H}, head_dim={D}), got {tuple(k.shape)}")
    _need(tuple(v.shape) == (N, H, D), f"v must be (N, n_kv={H}, head_dim={D}), got {tuple(v.shape)}")
    _need(k.dtype == k_cache.dtype, f"k dtype {k.dtype} != k_cache dtype {k_cache.dtype}")
    _need(v.dtype == v_cache.dtype, f"v dtype {v.dtype} != v_cache dtype {v_cache.dtype}")
    _need(isinstance(slots, torch.Tensor), f"slots must be a torch.Tensor, got {type(slots).__name__}")
    _need(slots.ndim == 1 and slots.shape[0] == N, f"slots must be (N,) = ({N},), got {tuple(slots.shape)}")
    _need(slots.dtype in (torch.int32, torch.int64), f"slots must be int32 or int64, got {slots.dtype}")
    devs = {t.device for t in (k_cache, v_cache, k, v, slots)}
    _need(len(devs) == 1, f"all tensors must be on one device, got {sorted(map(str, devs))}")
    _need(k_cache.data_ptr() != v_cache.data_ptr() or k_cache.numel() == 0,
          "k_cache and v_cache must be different tensors")
    if check_values is None:
        check_values = k.device.type == "cpu"
    if check_values and N:
        _need(bool(((slots >= 0) & (slots < S)).all()), f"slots must lie in [0, num_slots={S})")
        _need(torch.unique(slots).numel() == N, "slots must be distinct")


def store_kv(k_cache, v_cache, k, v, slots, *, backend: str = "torch",
             check_values: bool | None = None) -> None:
    """k_cache[slots[i]] = k[i] and v_cache[slots[i]] = v[i], in place."""
    check_store_kv_args(k_cache, v_cache, k, v, slots, check_values)
    if backend == "torch":
        return store_kv_ref(k_cache, v_cache, k, v, slots)
    if backend == "triton":
        return store_kv_triton(k_cache, v_cache, k, v, slots)
    raise ValueError(f"unknown kernel backend {backend!r}: expected one of {BACKENDS}")
