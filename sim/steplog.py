"""Per-step records (DESIGN.md §5 per-step rows). With tensor parallelism, `flops` and `bytes`
are one device's share (each device does 1/tp of the work in the same time).

Appends are cheap (one tuple per step or per run of steps, values scalar or arrays); the
columns are assembled once, with numpy, when the report asks for them.
"""
from __future__ import annotations

import numpy as np

COLUMNS = ("time", "duration", "batch_size", "query_tokens", "context_tokens", "flops", "bytes", "bound",
           "accepted", "page_allocs", "page_frees", "prefill_tokens")
_DTYPES = {"bound": "U7", "batch_size": np.int64, "query_tokens": np.int64, "context_tokens": np.int64,
           "accepted": np.int64, "page_allocs": np.int64, "page_frees": np.int64, "prefill_tokens": np.int64}


class StepLog:
    def __init__(self) -> None:
        self._blocks: list[tuple] = []  # (n, value per column...)
        self._cache: dict[str, np.ndarray] | None = None

    def append(self, n: int, *values) -> None:
        """One block of n steps; `values` follow COLUMNS, each a scalar or an array of length n."""
        assert len(values) == len(COLUMNS)
        self._blocks.append((n, *values))
        self._cache = None

    def set_last(self, column: str, value) -> None:
        """Overwrite a column of the most recent single step (e.g. accepted tokens, known after it)."""
        n, *vals = self._blocks[-1]
        vals[COLUMNS.index(column)] = value
        self._blocks[-1] = (n, *vals)
        self._cache = None

    def columns(self) -> dict[str, np.ndarray]:
        if self._cache is None:
            blocks = self._blocks
            ns = np.fromiter((b[0] for b in blocks), dtype=np.int64, count=len(blocks))
            ends = np.cumsum(ns)
            runs = [i for i, b in enumerate(blocks) if isinstance(b[2], np.ndarray)]  # blocks holding arrays
            isrun = np.zeros(len(blocks), dtype=bool)
            isrun[runs] = True
            cols = {}
            for c, name in enumerate(COLUMNS, start=1):
                vals = [0 if r else b[c] for b, r in zip(blocks, isrun.tolist())]
                out = np.repeat(np.asarray(vals, dtype=_DTYPES.get(name, np.float64)), ns)
                for i in runs:
                    out[ends[i] - ns[i]:ends[i]] = blocks[i][c]
                cols[name] = out
            self._cache = cols
        return self._cache

    def __len__(self) -> int:
        return int(sum(b[0] for b in self._blocks))
