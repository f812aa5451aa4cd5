"""Paged KV-cache allocator shared by the simulator and the reference engine.

Pure Python, stdlib only. The allocator deals in page ids and slots, never in time:
a slot is ``page_id * page_size + offset`` and pages come from one global pool.

Two modes:

``naive``
    Speculative nodes get real positions in the sequence's pages: node ``i`` of a
    ``speculate()`` call sits at position ``L + i`` (``L`` = committed length). Pages are
    allocated to hold them and, after ``commit``/``rollback``, pages holding no committed
    token go back to the global pool. On commit the accepted node ``path[j]`` must end up
    at position ``L + j``; every ``path[j] != j`` costs one KV copy.

``indexshare``
    Each sequence owns pages, a token index (logical position -> slot) and its own list of
    free slots. Growth and speculation take own free slots first and only then new pages
    from the pool; commit appends the accepted slots to the index (never a copy) and gives
    the rejected slots back to the sequence's free list. Pages return to the pool only on
    ``release``. A committed token's slot never changes until release.

Sequences returned by ``index()``, ``spec_slots()``, ``speculate()`` and ``grow()`` are the
allocator's own lists (no copy, for speed): treat them as read-only; ``index()`` and
``spec_slots()`` are live views, copy them if you keep them across calls.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Hashable, Literal, Sequence

__all__ = ["Slot", "OutOfPages", "AllocatorStats", "KVAllocator"]

Slot = int
Mode = Literal["naive", "indexshare"]


class OutOfPages(Exception):
    """The global pool cannot satisfy a request. Nothing was changed."""

    def __init__(self, needed: int, free: int):
        super().__init__(f"need {needed} page(s), {free} free")
        self.needed = needed
        self.free = free


@dataclass
class AllocatorStats:
    page_size: int
    num_pages: int
    kv_bytes_per_token: int = 0
    page_allocs: int = 0          # pages taken from the global pool
    page_frees: int = 0           # pages given back to the global pool
    copies: int = 0               # KV copies (one token each) requested by commit()
    kv_copy_bytes: int = 0        # copies * kv_bytes_per_token
    peak_pages: int = 0           # most pages in use at once
    pages_in_use: int = 0         # pages currently owned by sequences
    committed_tokens: int = 0     # committed tokens over all live sequences
    speculative_tokens: int = 0   # speculative nodes currently placed

    @property
    def used_slots(self) -> int:
        return self.committed_tokens + self.speculative_tokens

    @property
    def fragmentation(self) -> float:
        """1 - (slots holding committed or speculative tokens) / (slots in pages in use)."""
        cap = self.pages_in_use * self.page_size
        if cap == 0:
            return 0.0
        return 1.0 - (self.committed_tokens + self.speculative_tokens) / cap


class _Seq:
    __slots__ = ("pages", "index", "free", "spec", "parents")

    def __init__(self) -> None:
        self.pages: list[int] = []        # owned page ids, in order
        self.index: list[Slot] = []       # committed position -> slot
        self.free: list[Slot] = []        # indexshare: own free slots, stack (top = next)
        self.spec: list[Slot] | None = None     # node -> slot of pending speculation
        self.parents: list[int] | None = None   # parents of pending speculation


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


class KVAllocator:
    def __init__(self, num_pages: int, page_size: int, mode: Mode,
                 kv_bytes_per_token: int = 0):
        if num_pages < 0 or page_size < 1:
            raise ValueError("num_pages must be >= 0 and page_size >= 1")
        if mode not in ("naive", "indexshare"):
            raise ValueError(f"unknown mode {mode!r}")
        self.num_pages = num_pages
        self.page_size = page_size
        self.mode: Mode = mode
        self.kv_bytes_per_token = kv_bytes_per_token
        self._naive = mode == "naive"
        # Pool is a stack; pop() hands out page 0 first on a fresh allocator.
        self._pool: list[int] = list(range(num_pages - 1, -1, -1))
        self._seqs: dict[Hashable, _Seq] = {}
        self._valid_trees: set[tuple[int, ...]] = set()
        self.stats = AllocatorStats(page_size=page_size, num_pages=num_pages,
                                    kv_bytes_per_token=kv_bytes_per_token)

    # ------------------------------------------------------------------ queries
    def __contains__(self, seq_id: Hashable) -> bool:
        return seq_id in self._seqs

    def seq_ids(self) -> list[Hashable]:
        return list(self._seqs)

    def free_pages(self) -> int:
        return len(self._pool)

    def pages_owned(self, seq_id: Hashable) -> int:
        return len(self._seqs[seq_id].pages)

    def pages_needed(self, seq_id: Hashable, n_tokens: int) -> int:
        """Global pages a grow/speculate placing ``n_tokens`` more tokens would allocate.

        An unknown sequence counts as empty (it would be created by ``grow``).
        """
        s = self._seqs.get(seq_id)
        ps = self.page_size
        if s is None:
            return _ceil_div(n_tokens, ps) if n_tokens > 0 else 0
        occ = len(s.index) + n_tokens
        if s.spec is not None:
            occ += len(s.spec)
        d = occ - len(s.pages) * ps
        return -(-d // ps) if d > 0 else 0

    def can_grow(self, seq_id: Hashable, n_tokens: int) -> bool:
        return self.pages_needed(seq_id, n_tokens) <= len(self._pool)

    def index(self, seq_id: Hashable) -> Sequence[Slot]:
        return self._seqs[seq_id].index

    def spec_slots(self, seq_id: Hashable) -> Sequence[Slot]:
        spec = self._seqs[seq_id].spec
        return spec if spec is not None else ()

    def length(self, seq_id: Hashable) -> int:
        return len(self._seqs[seq_id].index)

    def has_speculation(self, seq_id: Hashable) -> bool:
        return self._seqs[seq_id].parents is not None

    # ------------------------------------------------------------------ pages
    def _take_pages(self, k: int) -> list[int]:
        """Take ``k`` pages from the pool (caller has checked availability)."""
        pool = self._pool
        pages = pool[-k:]
        del pool[-k:]
        pages.reverse()
        st = self.stats
        st.page_allocs += k
        used = self.num_pages - len(pool)
        st.pages_in_use = used
        if used > st.peak_pages:
            st.peak_pages = used
        return pages

    def _give_pages(self, pages: list[int]) -> None:
        # reversed so that the next allocation hands them out in their old order
        self._pool.extend(reversed(pages))
        st = self.stats
        st.page_frees += len(pages)
        st.pages_in_use = self.num_pages - len(self._pool)

    # ------------------------------------------------------------------ slots
    def _naive_slots(self, pages: list[int], a: int, b: int) -> list[Slot]:
        """Slots of positions [a, b) in a naive sequence."""
        if a >= b:
            return []
        ps = self.page_size
        p = a // ps
        lo = p * ps
        if b <= lo + ps:  # one page
            base = pages[p] * ps - lo
            return list(range(base + a, base + b))
        out: list[Slot] = []
        while a < b:
            hi = lo + ps
            e = b if b < hi else hi
            base = pages[p] * ps - lo
            out.extend(range(base + a, base + e))
            a = e
            lo = hi
            p += 1
        return out

    def _naive_place(self, s: _Seq, n: int) -> list[Slot]:
        """naive: the next n positions after the committed ones, taking pages as needed (atomic)."""
        L = len(s.index)
        end = L + n
        ps = self.page_size
        d = end - len(s.pages) * ps
        if d > 0:
            need = -(-d // ps)
            if need > len(self._pool):
                raise OutOfPages(need, len(self._pool))
            s.pages.extend(self._take_pages(need))
        return self._naive_slots(s.pages, L, end)

    def _take_slots(self, s: _Seq, n: int) -> list[Slot]:
        """indexshare: ``n`` slots, own free slots first, then new pages (atomic)."""
        fl = s.free
        k = len(fl)
        if n <= k:
            if n == 1:
                return [fl.pop()]
            out = fl[k - n:]
            del fl[k - n:]
            out.reverse()
            return out
        ps = self.page_size
        need = _ceil_div(n - k, ps)
        if need > len(self._pool):
            raise OutOfPages(need, len(self._pool))
        out = fl[::-1]
        fl.clear()
        new = self._take_pages(need)
        s.pages.extend(new)
        for p in new:
            base = p * ps
            out.extend(range(base, base + ps))
        excess = len(out) - n
        if excess:
            tail = out[n:]
            del out[n:]
            tail.reverse()
            fl.extend(tail)
        return out

    # ------------------------------------------------------------------ mutations
    def add(self, seq_id: Hashable) -> None:
        if seq_id in self._seqs:
            raise ValueError(f"sequence {seq_id!r} already exists")
        self._seqs[seq_id] = _Seq()

    def grow(self, seq_id: Hashable, n_tokens: int) -> list[Slot]:
        """Committed growth by ``n_tokens``; creates an unknown sequence. Returns new slots."""
        s = self._seqs.get(seq_id)
        if n_tokens == 1 and s is not None and s.parents is None:  # a decode step: the common case, kept short
            if self._naive:
                L = len(s.index)
                ps = self.page_size
                if L < len(s.pages) * ps:
                    slot = s.pages[L // ps] * ps + L % ps
                    s.index.append(slot)
                    self.stats.committed_tokens += 1
                    return [slot]
            elif s.free:
                slot = s.free.pop()
                s.index.append(slot)
                self.stats.committed_tokens += 1
                return [slot]
        if n_tokens < 0:
            raise ValueError("n_tokens must be >= 0")
        created = s is None
        if created:
            s = _Seq()
        elif s.parents is not None:
            raise ValueError(f"sequence {seq_id!r} has uncommitted speculation")
        slots = self._naive_place(s, n_tokens) if self._naive else self._take_slots(s, n_tokens)  # atomic
        s.index.extend(slots)
        self.stats.committed_tokens += n_tokens
        if created:
            self._seqs[seq_id] = s
        return slots

    def speculate(self, seq_id: Hashable, parents: Sequence[int]) -> list[Slot]:
        """Place drafted nodes (``parents[i] < i``, -1 = last committed token)."""
        s = self._seqs[seq_id]
        if s.parents is not None:
            raise ValueError(f"sequence {seq_id!r} already has uncommitted speculation")
        if type(parents) is not tuple or parents not in self._valid_trees:
            parents = tuple(parents)
            for i, p in enumerate(parents):
                if not -1 <= p < i:
                    raise ValueError(f"parents[{i}] = {p} is not in [-1, {i})")
            if len(self._valid_trees) < 4096:  # trees repeat: validate each shape once
                self._valid_trees.add(parents)
        n = len(parents)
        slots = self._naive_place(s, n) if self._naive else self._take_slots(s, n)
        s.spec = slots
        s.parents = parents
        self.stats.speculative_tokens += n
        return slots

    def commit(self, seq_id: Hashable, path: Sequence[int]) -> list[tuple[Slot, Slot]]:
        """Accept the root path ``path`` of the pending speculation; drop the rest.

        Returns the KV copies ``(src, dst)`` to perform in order (only naive trees).
        """
        s = self._seqs[seq_id]
        parents = s.parents
        if parents is None:
            raise ValueError(f"sequence {seq_id!r} has no pending speculation")
        n = len(parents)
        prev = -1
        for k in path:
            if not 0 <= k < n or parents[k] != prev:
                raise ValueError(f"{list(path)!r} is not a root path of the speculated tree")
            prev = k
        m = len(path)
        spec = s.spec
        st = self.stats
        copies: list[tuple[Slot, Slot]] = []
        if self._naive:
            if m:
                if path[-1] != m - 1:  # not a prefix 0..m-1: move path[j] to position L+j
                    # path[j] >= j and strictly increasing, so a later source is never
                    # an earlier destination: ascending order is safe.
                    for j, k in enumerate(path):
                        if k != j:
                            copies.append((spec[k], spec[j]))
                    nc = len(copies)
                    st.copies += nc
                    st.kv_copy_bytes += nc * self.kv_bytes_per_token
                s.index.extend(spec[:m])
            keep = _ceil_div(len(s.index), self.page_size)
            pages = s.pages
            if len(pages) > keep:
                extra = pages[keep:]
                del pages[keep:]
                self._give_pages(extra)
        else:
            if m == 0:
                rejected = spec
            elif path[-1] == m - 1:  # prefix
                s.index.extend(spec[:m])
                rejected = spec[m:]
            else:  # the path is strictly increasing: the rejected nodes lie between its nodes
                s.index.extend([spec[k] for k in path])
                rejected = []
                prev = 0
                for k in path:
                    rejected.extend(spec[prev:k])
                    prev = k + 1
                rejected.extend(spec[prev:])
            if rejected:
                s.free.extend(reversed(rejected))
        s.spec = None
        s.parents = None
        st.speculative_tokens -= n
        st.committed_tokens += m
        return copies

    def rollback(self, seq_id: Hashable) -> None:
        """Drop the pending speculation, if any (no-op without one)."""
        s = self._seqs[seq_id]
        if s.parents is not None:
            self.commit(seq_id, ())

    def release(self, seq_id: Hashable) -> None:
        """All the sequence's pages go back to the pool; the sequence is forgotten."""
        s = self._seqs.pop(seq_id)
        st = self.stats
        st.committed_tokens -= len(s.index)
        if s.spec is not None:
            st.speculative_tokens -= len(s.spec)
        if s.pages:
            self._give_pages(s.pages)

    # ------------------------------------------------------------------ checks
    def check(self) -> None:
        """Verify internal invariants (O(total tokens)); raises AssertionError. For tests."""
        ps = self.page_size
        owner: dict[int, Hashable] = {}
        for sid, s in self._seqs.items():
            for p in s.pages:
                assert 0 <= p < self.num_pages, f"bad page {p}"
                assert p not in owner, f"page {p} owned twice"
                owner[p] = sid
        pool = self._pool
        assert len(set(pool)) == len(pool), "page twice in pool"
        for p in pool:
            assert p not in owner, f"page {p} both free and owned"
        assert len(pool) + len(owner) == self.num_pages, "page leak"
        st = self.stats
        assert st.pages_in_use == len(owner)
        assert st.peak_pages >= st.pages_in_use
        assert st.page_allocs - st.page_frees == st.pages_in_use
        committed = spec_total = 0
        for sid, s in self._seqs.items():
            spec = s.spec if s.spec is not None else []
            assert (s.spec is None) == (s.parents is None)
            if s.parents is not None:
                assert len(s.spec) == len(s.parents)
            committed += len(s.index)
            spec_total += len(spec)
            mine = set(s.pages)
            used = list(s.index) + list(spec) + list(s.free)
            assert len(set(used)) == len(used), f"slot used twice in {sid!r}"
            for x in used:
                assert x // ps in mine, f"slot {x} outside {sid!r}'s pages"
            if self._naive:
                assert not s.free
                occ = len(s.index) + len(spec)
                assert len(s.pages) == _ceil_div(occ, ps), "naive page count"
                expect = self._naive_slots(s.pages, 0, occ)
                assert list(s.index) + list(spec) == expect, "naive layout"
            else:
                assert len(used) == len(s.pages) * ps, "indexshare slot leak"
        assert st.committed_tokens == committed
        assert st.speculative_tokens == spec_total
