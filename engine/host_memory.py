"""Keep freed host memory for reuse (glibc's malloc), so that large per-step tensors stop
page-faulting.

On a CPU every engine step allocates the same large tensors and frees them again: the logits,
the paged attention's gathered keys and values, its scores. By default glibc serves a block
above its mmap threshold with a fresh mapping and unmaps it on free (the threshold moves with
the process's history), and it returns a heap top above its trim threshold to the kernel. The
next step's block is then fresh memory, and every page of it faults when first written. A fault
costs about 1.5 us on this VM, and nothing in the cost model knows of it:
- on the step-time grid, Llama-shaped decoding of 16 sequences at context 2,048 faulted 61,000
  pages per forward (the gathered K/V, 128 MB a layer) and read 25% slower than predicted; 4 of
  62 points faulted 8,000 to 61,000 pages per call, none with this setting;
- a Medusa batch-4 step of the family faulted 1,024 pages (its 4 MB of stacked logit rows) in one
  run and none in the next.

`retain_freed_memory()` raises the mmap threshold to 1 GiB and turns trimming off, so a freed
block stays mapped and serves the next allocation of its size. The process keeps its peak
footprint rather than returning memory, which an engine whose steps repeat would map again
anyway. The entry points that run and time the engine call it (`python -m engine`, `python -m
validation`, `python -m validation.calibrate`); it does nothing where the C library has no
`mallopt` (not glibc, not Linux).
"""
from __future__ import annotations

import ctypes
import sys

M_TRIM_THRESHOLD = -1  # glibc's mallopt parameters (malloc.h)
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 1 << 30  # bytes: a block below this comes from the heap, and is reused once freed
TRIM_THRESHOLD = 2 ** 31 - 1  # bytes of free heap top kept rather than returned (the largest int)


def retain_freed_memory() -> bool:
    """Set glibc's two thresholds as above; True where both settings took."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the C library this process already runs
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
