"""Dynamic speculation depth (DESIGN.md §4 `policy`), shared by both executors.

- `fixed`: always the scheme's configured depth.
- `batch_table`: depth by the number of decoding sequences, e.g. {"1-16": 3, "17-64": 2, "65-": 0}.
- `goodput`: the depth that maximises expected committed tokens per second of predicted step
  time, B·E[tokens | d] / t(B, context, d), from the cost model and the acceptance model.

A policy sees only the batch size and the mean context, so its choice is cheap to cache.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from sim.specio import Node


@dataclass(frozen=True)
class Fixed:
    depth: int

    def choose(self, batch: int, context: float) -> int:
        return self.depth

    def describe(self):
        return "fixed"


@dataclass(frozen=True)
class BatchTable:
    rows: tuple[tuple[int, int | None, int], ...]  # (lo, hi or None, depth)

    def choose(self, batch: int, context: float) -> int:
        for lo, hi, d in self.rows:
            if batch >= lo and (hi is None or batch <= hi):
                return d
        return 0

    def describe(self):
        return {"batch_table": {f"{lo}-{'' if hi is None else hi}": d for lo, hi, d in self.rows}}


class Goodput:
    """argmax over d in 0..max_depth of batch·(1 + accepted(d)) / step_time(batch, context, d)."""

    def __init__(self, max_depth: int, accepted: Callable[[int], float],
                 step_time: Callable[[int, float, int], float], context_bucket: int = 256):
        self.max_depth = max_depth
        self.accepted = accepted
        self.step_time = step_time
        self.bucket = context_bucket
        self._cache: dict[tuple[int, int], int] = {}
        self._acc: dict[int, float] = {}

    def rate(self, batch: int, context: float, d: int) -> float:
        if d not in self._acc:
            self._acc[d] = 1.0 + (self.accepted(d) if d else 0.0)
        return batch * self._acc[d] / self.step_time(batch, context, d)

    def choose(self, batch: int, context: float) -> int:
        key = (batch, int(context) // self.bucket)
        d = self._cache.get(key)
        if d is None:
            ctx = (key[1] + 0.5) * self.bucket
            d = max(range(self.max_depth + 1), key=lambda k: (self.rate(batch, ctx, k), -k))
            self._cache[key] = d
        return d

    def describe(self):
        return "goodput"


def parse_policy(node: Node, max_depth: int):
    """`fixed` | `goodput` | {batch_table: {"lo-hi": depth, ...}}; goodput is returned as the
    string 'goodput' and built by the scheme, which knows its cost and acceptance."""
    if isinstance(node.value, str):
        name = node.string(("fixed", "goodput"))
        return Fixed(max_depth) if name == "fixed" else "goodput"
    f = node.mapping(("batch_table",), required=("batch_table",))
    table = f["batch_table"]
    entries = table.mapping(list(table.value) if isinstance(table.value, dict) else ())
    if not entries:
        raise table.error("expected at least one row like \"1-16\": 3")
    rows = []
    for key, sub in entries.items():
        lo_s, sep, hi_s = key.partition("-")
        try:
            lo = int(lo_s)
            hi = int(hi_s) if hi_s else None
        except ValueError:
            raise sub.error("expected a batch-size range like \"1-16\" or \"65-\" as the key") from None
        if not sep or lo < 1 or (hi is not None and hi < lo):
            raise sub.error("expected a batch-size range like \"1-16\" or \"65-\" as the key")
        rows.append((lo, hi, sub.integer(lo=0, hi=max_depth)))
    rows.sort()
    for (lo1, hi1, _), (lo2, _, _) in zip(rows, rows[1:]):
        if hi1 is None or lo2 <= hi1:
            raise table.error(f"batch-size ranges overlap at {lo2}")
    return BatchTable(tuple(rows))
