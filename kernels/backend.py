"""Backend selection for the kernels: ``get_ops("torch" | "triton")`` and ``default_backend``.

The torch references are the CPU default; the Triton kernels are the GPU default (DESIGN.md
section 2). Triton is imported lazily, only when a Triton kernel is first launched, so the torch
path works without triton installed and importing ``kernels`` never fixes triton's mode.

Triton on CPU tensors runs only in the interpreter, and triton 3.7 decides that once, when
``triton.language`` is first imported (its own ``@jit`` helpers such as ``tl.zeros`` and
``tl.sum`` are built then): ``TRITON_INTERPRET=1`` must be in the environment before anything
imports triton. ``require_triton`` checks this and raises a RuntimeError that says so, instead
of letting the launch fail deep inside triton.
"""
from __future__ import annotations

import functools
import importlib.util
import os
from dataclasses import dataclass
from typing import Callable

import torch

__all__ = [
    "BACKENDS",
    "KernelOps",
    "get_ops",
    "default_backend",
    "triton_available",
    "interpreter_active",
    "require_triton",
    "TritonKernel",
]

BACKENDS = ("torch", "triton")


@dataclass(frozen=True)
class KernelOps:
    """The three kernels of one backend, each the checking wrapper bound to that backend."""
    name: str
    store_kv: Callable
    paged_attention: Callable
    rms_norm: Callable


@functools.lru_cache(maxsize=None)
def get_ops(backend: str, check_values: bool | None = None) -> KernelOps:
    """The kernels of ``backend`` ("torch": the references; "triton": the Triton kernels).
    check_values: also check index values (slots in range, distinct, every query sees itself);
    None = on the CPU only (on a GPU it would force a sync). Shapes, dtypes and strides are
    always checked."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown kernel backend {backend!r}: expected one of {BACKENDS}")
    if backend == "triton" and not triton_available():
        raise RuntimeError("kernel backend 'triton' needs the triton package, which is not installed")
    from kernels.attention import paged_attention
    from kernels.kv_store import store_kv
    from kernels.rmsnorm import rms_norm
    return KernelOps(
        name=backend,
        store_kv=functools.partial(store_kv, backend=backend, check_values=check_values),
        paged_attention=functools.partial(paged_attention, backend=backend, check_values=check_values),
        rms_norm=functools.partial(rms_norm, backend=backend),
    )


def default_backend(device: torch.device | str) -> str:
    """"triton" on a CUDA device when triton is installed, else "torch"."""
    device = torch.device(device)
    return "triton" if device.type == "cuda" and triton_available() else "torch"


def triton_available() -> bool:
    return importlib.util.find_spec("triton") is not None


def interpreter_active() -> bool:
    """Whether Triton kernels run in the interpreter in this process. Before triton is imported
    this reads the environment; after, it asks triton whether its language was built for the
    interpreter (which is what decides whether a CPU launch can work)."""
    import sys
    if "triton.language" not in sys.modules:
        return os.environ.get("TRITON_INTERPRET", "0").lower() in ("1", "true", "on", "yes")
    import triton.language as tl
    from triton.runtime.interpreter import InterpretedFunction
    return isinstance(tl.zeros, InterpretedFunction)


def require_triton(device: torch.device):
    """Import triton for a launch on ``device``; raise a clear error where it cannot run."""
    if not triton_available():
        raise RuntimeError("kernel backend 'triton' needs the triton package, which is not installed")
    if device.type == "cuda":
        import triton
        return triton
    if device.type == "cpu":
        if not interpreter_active():
            raise RuntimeError(
                "the triton backend on CPU tensors needs the Triton interpreter: set TRITON_INTERPRET=1 "
                "in the environment before triton is first imported (or use backend='torch')")
        import triton
        return triton
    raise RuntimeError(f"the triton backend does not run on device {device}")


class TritonKernel:
    """A Triton kernel defined lazily: ``kernel(device)`` returns the ``triton.jit`` of ``fn``,
    built on first use, so that importing a kernel module never imports triton.

    ``fn`` is a plain function in Triton's language, in a module compiled with
    ``from __future__ import annotations`` (so ``X: tl.constexpr`` stays a string, which triton
    reads) whose global ``tl`` is ``None`` until this binds it to ``triton.language``."""

    def __init__(self, fn: Callable):
        self.fn = fn
        self._jitted = None

    def __call__(self, device: torch.device):
        triton = require_triton(device)
        if self._jitted is None:
            import triton.language as tl
            self.fn.__globals__["tl"] = tl
            self._jitted = triton.jit(self.fn)
        return self._jitted
