"""Kernels of the reference engine: paged attention, KV store, RMSNorm.

Each has a torch reference (the CPU default) and a Triton kernel (the GPU default) behind a
wrapper that checks shapes, dtypes, devices and strides (ValueError on a mismatch). Pick the
implementations with ``get_ops(backend)``; ``default_backend(device)`` says which one to use.
Importing this package does not import triton.
"""
from kernels.attention import NO_TREE, ancestor_masks, paged_attention
from kernels.backend import KernelOps, default_backend, get_ops
from kernels.kv_store import store_kv
from kernels.rmsnorm import rms_norm

__all__ = [
    "NO_TREE",
    "KernelOps",
    "ancestor_masks",
    "default_backend",
    "get_ops",
    "paged_attention",
    "rms_norm",
    "store_kv",
]
