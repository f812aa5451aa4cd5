"""The page-level projection of `sim.kv.KVAllocator`: the same decisions and the same counts
(page allocations and frees, copies, copy bytes, peak pages, pages needed), without tracking
which physical slot holds which token.

The simulator needs only the counts; the engine needs the slots. A sequence here is three
integers (committed tokens, pages owned, pending draft nodes), so a speculative step costs a few
additions instead of list work over every drafted slot. tests/test_kv.py drives both classes with
the same random operations and asserts identical statistics after every one.
"""
from __future__ import annotations

from typing import Hashable, Sequence

from sim.kv import AllocatorStats, Mode, OutOfPages


class PageCounter:
    def __init__(self, num_pages: int, page_size: int, mode: Mode, kv_bytes_per_token: int = 0):
        if num_pages < 0 or page_size < 1:
            raise ValueError("num_pages must be >= 0 and page_size >= 1")
        if mode not in ("naive", "indexshare"):
            raise ValueError(f"unknown mode {mode!r}")
        self.num_pages, self.page_size, self.mode = num_pages, page_size, mode
        self.kv_bytes_per_token = kv_bytes_per_token
        self._naive = mode == "naive"
        self._free = num_pages
        self._seqs: dict[Hashable, list[int]] = {}  # seq -> [committed tokens, pages owned, pending nodes or -1]
        self.stats = AllocatorStats(page_size=page_size, num_pages=num_pages, kv_bytes_per_token=kv_bytes_per_token)

    # ---- queries ----------------------------------------------------------------------------
    def __contains__(self, seq_id: Hashable) -> bool:
        return seq_id in self._seqs

    def free_pages(self) -> int:
        return self._free

    def pages_owned(self, seq_id: Hashable) -> int:
        return self._seqs[seq_id][1]

    def length(self, seq_id: Hashable) -> int:
        return self._seqs[seq_id][0]

    def pages_needed(self, seq_id: Hashable, n_tokens: int) -> int:
        s = self._seqs.get(seq_id)
        ps = self.page_size
        if s is None:
            return -(-n_tokens // ps) if n_tokens > 0 else 0
        d = s[0] + n_tokens + (s[2] if s[2] > 0 else 0) - s[1] * ps
        return -(-d // ps) if d > 0 else 0

    def can_grow(self, seq_id: Hashable, n_tokens: int) -> bool:
        return self.pages_needed(seq_id, n_tokens) <= self._free

    # ---- pool -------------------------------------------------------------------------------
    def _take(self, s: list[int], k: int) -> None:
        if k > self._free:
            raise OutOfPages(k, self._free)
        self._free -= k
        s[1] += k
        st = self.stats
        st.page_allocs += k
        used = self.num_pages - self._free
        st.pages_in_use = used
        if used > st.peak_pages:
            st.peak_pages = used

    def _give(self, s: list[int], k: int) -> None:
        self._free += k
        s[1] -= k
        st = self.stats
        st.page_frees += k
        st.pages_in_use = self.num_pages - self._free

    def _place(self, s: list[int], n: int) -> None:
        """Room for n more tokens after the committed ones (grow and speculate never run while
        drafts are pending; both modes fill a sequence's pages before taking new ones)."""
        d = s[0] + n - s[1] * self.page_size
        if d > 0:
            self._take(s, -(-d // self.page_size))

    # ---- mutations --------------------------------------------------------------------------
    def grow(self, seq_id: Hashable, n_tokens: int) -> list:
        s = self._seqs.get(seq_id)
        if s is None:
            s = [0, 0, -1]
            if n_tokens > 0:
                need = -(-n_tokens // self.page_size)
                if need > self._free:
                    raise OutOfPages(need, self._free)
            self._seqs[seq_id] = s
        elif s[2] >= 0:
            raise ValueError(f"sequence {seq_id!r} has uncommitted speculation")
        self._place(s, n_tokens)
        s[0] += n_tokens
        self.stats.committed_tokens += n_tokens
        return []

    def speculate(self, seq_id: Hashable, parents: Sequence[int]) -> list:
        s = self._seqs[seq_id]
        if s[2] >= 0:
            raise ValueError(f"sequence {seq_id!r} already has uncommitted speculation")
        n = len(parents)
        self._place(s, n)
        s[2] = n
        self.stats.speculative_tokens += n
        return []

    def decode_step(self, seq_id: Hashable, nodes: int) -> None:
        """grow(seq, 1) then speculate(seq, a tree of `nodes`), in one call: the same pages (placing
        1 + nodes tokens at once takes ceil of the same shortfall) for the simulator's steady runs;
        with no nodes, grow(seq, 1) alone (a sequence that drafts nothing this step)."""
        s = self._seqs[seq_id]
        if s[2] >= 0:
            raise ValueError(f"sequence {seq_id!r} has uncommitted speculation")
        self._place(s, 1 + nodes)
        s[0] += 1
        s[2] = nodes if nodes else -1
        st = self.stats
        st.committed_tokens += 1
        st.speculative_tokens += nodes

    def commit(self, seq_id: Hashable, path: Sequence[int]) -> list:
        """Accept a root path (trusted: the simulator samples it from the tree it drafted)."""
        s = self._seqs[seq_id]
        n = s[2]
        if n < 0:
            raise ValueError(f"sequence {seq_id!r} has no pending speculation")
        m = len(path)
        st = self.stats
        if self._naive:
            if m and path[-1] != m - 1:  # not a prefix: every node out of place is copied
                copies = sum(1 for j, k in enumerate(path) if k != j)
                st.copies += copies
                st.kv_copy_bytes += copies * self.kv_bytes_per_token
            keep = -(-(s[0] + m) // self.page_size)
            if s[1] > keep:
                self._give(s, s[1] - keep)
        s[0] += m
        s[2] = -1
        st.speculative_tokens -= n
        st.committed_tokens += m
        return []

    def rollback(self, seq_id: Hashable) -> None:
        if self._seqs[seq_id][2] >= 0:
            self.commit(seq_id, ())

    def release(self, seq_id: Hashable) -> None:
        s = self._seqs.pop(seq_id)
        st = self.stats
        st.committed_tokens -= s[0]
        if s[2] > 0:
            st.speculative_tokens -= s[2]
        if s[1]:
            self._give(s, s[1])
