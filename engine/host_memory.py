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
anyway.

Retained memory still faults once, where the heap first grows to a new size: with only the two
thresholds set, the family's closed batch of 16 prompts at concurrency 32 faulted 11,777 pages
(46 MB) inside its prefill step in the second of two runs in one process, and 11,000-15,000
pages a run in all (sys time 0.10-0.13 s of a 2.5 s run). So it also writes PREFAULT_BYTES
once and frees them: the heap's top then holds that much touched memory, which later
allocations carve from (none of that run's steps faulted a page after it).

The entry points that run and time the engine call it (`python -m engine`, `python -m
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
PREFAULT_BYTES = 512 << 20  # heap written once up front (below MMAP_THRESHOLD: it comes from the heap)


def retain_freed_memory(prefault: int = PREFAULT_BYTES) -> bool:
    """Set glibc's two thresholds as above, then write `prefault` bytes of heap once and free
    them; True where both settings took (nothing is written otherwise)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None)  # the C library this process already runs
        mallopt, malloc, free = libc.mallopt, libc.malloc, libc.free
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    if not (mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) and mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)):
        return False
    if prefault > 0:
        malloc.argtypes, malloc.restype = (ctypes.c_size_t,), ctypes.c_void_p
        free.argtypes, free.restype = (ctypes.c_void_p,), None
        block = malloc(prefault)
        if block:
            ctypes.memset(block, 0, prefault)
            free(block)
    return True
