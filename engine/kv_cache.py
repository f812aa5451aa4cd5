"""The engine's paged KV cache: the tensors behind sim's page allocator (DESIGN.md §6, §10).

Per layer one K and one V tensor laid out in pages, (num_pages, page_size, n_kv, head_dim), viewed
flat by slot = page_id * page_size + offset: the slots `sim.kv.KVAllocator` hands out (the
scheduler's `kv`) are the rows the kernels read and write. Nothing here decides where a token
goes; the allocator does, in both modes:

* indexshare: a sequence's KV is read through its token index (`kv.index(seq)` + this step's
  speculative slots); accepted drafts stay where they were written, nothing is copied;
* naive: accepted tree nodes off the prefix are moved into consecutive positions. `kv.commit`
  returns those (src, dst) copies and the scheduler's commit puts them on the batch; the engine
  applies them (`KVCache.copy`) right after the commit, before anything else can reuse the pages.

Physical size: the allocator's pool has the trace's `num_pages` (the policy the simulator also
uses), which for a scaled-down model can be far more than the engine will touch. The pool hands
out the lowest free page ids (a stack that starts at page 0 and takes back freed pages on top), so
every page id used is below the peak number of pages in use; the engine sizes the tensors for the
most pages the run can hold at once (`pages_bound`) and `ensure` grows them if a slot lies beyond.
"""
from __future__ import annotations

from typing import Hashable, Iterable, Sequence

import torch

from sim.models import ModelSpec


class KVCache:
    def __init__(self, spec: ModelSpec, num_pages: int, page_size: int, device="cpu", dtype=torch.float32):
        self.spec = spec
        self.page_size = page_size
        self.device = torch.device(device)
        self.dtype = dtype
        self.num_pages = 0
        self.data = torch.empty(0)
        self._alloc(max(1, num_pages))

    def _alloc(self, num_pages: int) -> None:
        s = self.spec
        # (layers, K|V, pages, page_size, n_kv, head_dim); zeros so unwritten slots are finite
        data = torch.zeros((s.layers, 2, num_pages, self.page_size, s.kv_heads, s.head_dim),
                           device=self.device, dtype=self.dtype)
        if self.num_pages:
            data[:, :, :self.num_pages] = self.data
        self.data = data
        self.num_pages = num_pages
        self._flat = data.view(s.layers, 2, num_pages * self.page_size, s.kv_heads, s.head_dim)

    @property
    def num_slots(self) -> int:
        return self.num_pages * self.page_size

    @property
    def bytes_per_token(self) -> int:
        s = self.spec
        return s.layers * 2 * s.kv_heads * s.head_dim * self.data.element_size()

    @property
    def nbytes(self) -> int:
        return self.data.numel() * self.data.element_size()

    def layer(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(k, v) of layer i, each (num_slots, n_kv, head_dim), views into the pages."""
        return self._flat[i, 0], self._flat[i, 1]

    def ensure(self, max_slot: int) -> None:
        """Grow the pages (doubling) so that `max_slot` is a valid slot."""
        if max_slot >= self.num_slots:
            need = max_slot // self.page_size + 1
            self._alloc(max(need, 2 * self.num_pages))

    def copy(self, copies: Sequence[tuple[int, int]]) -> None:
        """Perform the allocator's KV copies (src slot -> dst slot) in order, in every layer.

        One gather then one scatter equals the ordered copies unless a copy reads a slot an
        earlier one wrote (sim's naive commit never does: path[j] >= j, strictly increasing);
        otherwise they run one by one."""
        if not copies:
            return
        src = [c[0] for c in copies]
        dst = [c[1] for c in copies]
        written: set[int] = set()
        ordered = False
        for s_, d_ in copies:
            if s_ in written:
                ordered = True
                break
            written.add(d_)
        if ordered:
            for s_, d_ in copies:
                self._flat[:, :, d_] = self._flat[:, :, s_]
            return
        si = torch.as_tensor(src, device=self.device)
        di = torch.as_tensor(dst, device=self.device)
        self._flat[:, :, di] = self._flat[:, :, si]

    def gather(self, slots: Sequence[int], layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """K and V of the given slots in one layer, each (len(slots), n_kv, head_dim) (for checks)."""
        idx = torch.as_tensor(list(slots), dtype=torch.int64, device=self.device)
        k, v = self.layer(layer)
        return k[idx], v[idx]


class SlotTables:
    """Each live sequence's committed slots (its row of the kernels' kv_slots) as a growing int64
    tensor, extended by the new tail of `kv.index(seq)` each step instead of rebuilt from Python
    ints. Valid because a committed slot never changes until the sequence is released (sim.kv).
    `kv.index` is the allocator's own list for the sequence, a new list once a released sequence
    is placed again, so a row whose list has changed is rebuilt; `drop` frees a finished row."""

    def __init__(self) -> None:
        self._rows: dict[Hashable, tuple[torch.Tensor, int, Sequence[int]]] = {}

    def row(self, seq_id: Hashable, index: Sequence[int]) -> torch.Tensor:
        buf, n, owner = self._rows.get(seq_id, (None, 0, None))
        if owner is not index:  # new, or released (preempted) and placed again
            buf, n = None, 0
        m = len(index)
        assert m >= n, "a committed index only grows until release"
        if buf is None or m > buf.shape[0]:
            grown = torch.empty(max(m, 64, 2 * (buf.shape[0] if buf is not None else 0)), dtype=torch.int64)
            if n:
                grown[:n] = buf[:n]
            buf = grown
        if m > n:
            buf[n:m] = torch.as_tensor(index[n:m], dtype=torch.int64)
        self._rows[seq_id] = (buf, m, index)
        return buf[:m]

    def drop(self, seq_id: Hashable) -> None:
        self._rows.pop(seq_id, None)

    def __len__(self) -> int:
        return len(self._rows)


def pages_bound(lengths: Iterable[int], page_size: int, max_seqs: int, num_pages: int) -> int:
    """Most pages a run can hold at once: the `max_seqs` largest worst-case sequences (prompt +
    output + largest draft tree, in tokens), each rounded up to pages; at most the pool."""
    per_seq = sorted((-(-n // page_size) for n in lengths), reverse=True)
    return max(1, min(num_pages, sum(per_seq[:max_seqs])))
