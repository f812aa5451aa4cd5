"""Per-step records (DESIGN.md §5 per-step rows). With tensor parallelism, `flops` and `bytes`
are one device's share (each device does 1/tp of the work in the same time).

Appends are cheap (one tuple per step or per run of steps, values scalar or arrays); every few
thousand blocks they are packed into numpy column chunks, so a million steps take about 100
bytes each. The binding roof is kept as a flag and spelled out when the columns are read.
"""
from __future__ import annotations

import numpy as np

COLUMNS = ("time", "duration", "batch_size", "query_tokens", "context_tokens", "flops", "bytes", "bound",
           "accepted", "page_allocs", "page_frees", "prefill_tokens", "draft_time")
_INTS = {"batch_size", "query_tokens", "context_tokens", "accepted", "page_allocs", "page_frees", "prefill_tokens"}
_PACK_EVERY = 4096  # blocks


class StepLog:
    def __init__(self) -> None:
        self._blocks: list[tuple] = []  # (n, value per column...)
        self._chunks: dict[str, list[np.ndarray]] = {c: [] for c in COLUMNS}  # "bound" holds compute-bound flags
        self._cache: dict[str, np.ndarray] | None = None

    def append(self, n: int, *values) -> None:
        """One block of n steps; `values` follow COLUMNS, each a scalar or an array of length n."""
        assert len(values) == len(COLUMNS)
        if len(self._blocks) >= _PACK_EVERY:
            self._pack()
        self._blocks.append((n, *values))
        self._cache = None

    def set_last(self, column: str, value) -> None:
        """Overwrite a column of the most recent single step (e.g. accepted tokens, known after it)."""
        n, *vals = self._blocks[-1]
        vals[COLUMNS.index(column)] = value
        self._blocks[-1] = (n, *vals)
        self._cache = None

    def _pack(self) -> None:
        blocks = self._blocks
        if not blocks:
            return
        ns = np.fromiter((b[0] for b in blocks), dtype=np.int64, count=len(blocks))
        ends = np.cumsum(ns)
        is_run = [isinstance(b[2], np.ndarray) for b in blocks]  # blocks holding arrays
        runs = [i for i, r in enumerate(is_run) if r]
        for c, name in enumerate(COLUMNS, start=1):
            vals = [0 if r else b[c] for b, r in zip(blocks, is_run)]
            if name == "bound":
                vals = [False if r else v == "compute" for v, r in zip(vals, is_run)]
                dtype = bool
            else:
                dtype = np.int64 if name in _INTS else np.float64
            out = np.repeat(np.asarray(vals, dtype=dtype), ns)
            for i in runs:
                v = blocks[i][c]
                out[ends[i] - ns[i]:ends[i]] = (np.asarray(v) == "compute") if name == "bound" else v
            self._chunks[name].append(out)
        self._blocks = []

    def columns(self) -> dict[str, np.ndarray]:
        if self._cache is None:
            self._pack()
            cols = {}
            for name in COLUMNS:
                parts = self._chunks[name]
                dtype = bool if name == "bound" else (np.int64 if name in _INTS else np.float64)
                arr = np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)
                self._chunks[name] = [arr]
                cols[name] = np.where(arr, "compute", "memory") if name == "bound" else arr
            self._cache = cols
        return self._cache

    def __len__(self) -> int:
        return len(self.columns()["time"])
