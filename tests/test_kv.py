"""Tests for the paged KV allocator (sim/kv.py): hand-computed cases and a stateful model check."""
from __future__ import annotations

import random

import pytest
from hypothesis import event, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from sim.kv import AllocatorStats, KVAllocator, OutOfPages

MODES = ("naive", "indexshare")


def snapshot(a: KVAllocator):
    """Everything observable about an allocator, to check that a failed call changed nothing."""
    seqs = {sid: (list(a.index(sid)), list(a.spec_slots(sid)), a.pages_owned(sid))
            for sid in a.seq_ids()}
    return a.free_pages(), repr(a.stats), seqs, list(a._pool)


def apply_copies(mem: dict, copies):
    for src, dst in copies:
        mem[dst] = mem[src]


# --------------------------------------------------------------------------- naive, by hand

def test_naive_chain_prefix_commit():
    a = KVAllocator(num_pages=4, page_size=4, mode="naive", kv_bytes_per_token=100)
    assert a.grow("s", 3) == [0, 1, 2]
    assert a.stats.page_allocs == 1 and a.free_pages() == 3
    assert a.pages_needed("s", 4) == 1
    assert list(a.speculate("s", [-1, 0, 1, 2])) == [3, 4, 5, 6]
    assert a.stats.page_allocs == 2 and a.stats.pages_in_use == 2
    assert list(a.spec_slots("s")) == [3, 4, 5, 6]
    assert a.commit("s", [0]) == []                  # accepted prefix: no copies
    assert list(a.index("s")) == [0, 1, 2, 3]
    assert a.length("s") == 4
    assert list(a.spec_slots("s")) == []
    assert a.stats.page_frees == 1                   # page 1 held only rejected nodes
    assert a.stats.pages_in_use == 1 and a.free_pages() == 3
    assert a.grow("s", 1) == [4]                     # page 1 comes back
    assert a.stats.page_allocs == 3
    assert a.stats.copies == 0 and a.stats.kv_copy_bytes == 0
    assert a.stats.peak_pages == 2
    a.check()


def test_naive_tree_path_copies():
    # page_size 4, L = 5: positions 5..8 -> slots 5, 6, 7 (page 1) and 8 (page 2)
    a = KVAllocator(num_pages=8, page_size=4, mode="naive", kv_bytes_per_token=10)
    a.grow("s", 5)
    parents = [-1, -1, 0, 1]                         # node 3 hangs off node 1 off the root
    spec = list(a.speculate("s", parents))
    assert spec == [5, 6, 7, 8]
    assert a.stats.page_allocs == 3
    copies = a.commit("s", [1, 3])
    assert copies == [(6, 5), (8, 6)]                # node1 -> pos 5, node3 -> pos 6
    assert list(a.index("s")) == [0, 1, 2, 3, 4, 5, 6]
    assert a.stats.copies == 2 and a.stats.kv_copy_bytes == 20
    assert a.stats.page_frees == 1 and a.stats.pages_in_use == 2   # page 2 freed
    a.check()


def test_naive_overlapping_copies_in_order():
    a = KVAllocator(num_pages=8, page_size=4, mode="naive")
    a.grow("s", 2)
    parents = [-1, -1, 1, 2, 0]
    spec = list(a.speculate("s", parents))
    mem = {slot: f"n{i}" for i, slot in enumerate(spec)}
    copies = a.commit("s", [1, 2, 3])
    assert copies == [(spec[1], spec[0]), (spec[2], spec[1]), (spec[3], spec[2])]
    apply_copies(mem, copies)
    assert [mem[s] for s in a.index("s")[2:]] == ["n1", "n2", "n3"]


def test_naive_rollback_frees_spec_pages():
    a = KVAllocator(num_pages=4, page_size=2, mode="naive")
    a.grow("s", 2)
    a.speculate("s", [-1, 0, 1, 2, 3])               # 5 nodes: 3 more pages
    assert a.free_pages() == 0 and a.stats.page_allocs == 4
    a.rollback("s")
    assert a.free_pages() == 3 and a.stats.page_frees == 3
    a.rollback("s")                                  # no-op without speculation
    assert list(a.index("s")) == [0, 1]
    a.check()


# --------------------------------------------------------------------------- indexshare, by hand

def test_indexshare_chain_prefix_commit():
    a = KVAllocator(num_pages=4, page_size=4, mode="indexshare", kv_bytes_per_token=100)
    assert a.grow("s", 3) == [0, 1, 2]
    assert list(a.speculate("s", [-1, 0, 1, 2])) == [3, 4, 5, 6]
    assert a.stats.page_allocs == 2
    assert a.commit("s", [0]) == []
    assert list(a.index("s")) == [0, 1, 2, 3]
    assert a.stats.page_frees == 0 and a.stats.pages_in_use == 2   # page 1 stays
    assert a.pages_needed("s", 4) == 0               # 4 own free slots: 4, 5, 6, 7
    assert a.grow("s", 1) == [4]                     # first rejected slot comes back first
    assert list(a.speculate("s", [-1, 0, 1, 2])) == [5, 6, 7, 8]
    assert a.stats.page_allocs == 3
    assert a.commit("s", [0, 1, 2, 3]) == []
    assert list(a.index("s")) == [0, 1, 2, 3, 4, 5, 6, 7, 8]
    assert a.stats.copies == 0 and a.stats.kv_copy_bytes == 0
    a.check()


def test_indexshare_tree_path_no_copies():
    a = KVAllocator(num_pages=8, page_size=4, mode="indexshare", kv_bytes_per_token=10)
    a.grow("s", 5)
    spec = list(a.speculate("s", [-1, -1, 0, 1]))
    assert spec == [5, 6, 7, 8]
    assert a.commit("s", [1, 3]) == []
    assert list(a.index("s")) == [0, 1, 2, 3, 4, 6, 8]
    assert a.stats.page_allocs == 3 and a.stats.page_frees == 0
    # own free slots: rejected 5, 7 first (in node order), then the rest of page 2
    assert a.grow("s", 4) == [5, 7, 9, 10]
    assert a.grow("s", 2) == [11, 12]
    assert a.stats.page_allocs == 4
    assert a.stats.kv_copy_bytes == 0
    a.check()


def test_indexshare_slots_stable_and_release():
    a = KVAllocator(num_pages=6, page_size=2, mode="indexshare")
    a.grow("a", 3)
    a.grow("b", 1)
    before = list(a.index("a"))
    a.speculate("a", [-1, -1, 1])
    a.commit("a", [1, 2])
    a.speculate("a", [-1])
    a.rollback("a")
    assert list(a.index("a"))[:3] == before
    assert a.stats.pages_in_use == 4                 # a: 3 pages (never returned), b: 1
    a.release("a")
    assert a.free_pages() == 5 and a.stats.pages_in_use == 1
    assert "a" not in a
    a.check()


# --------------------------------------------------------------------------- both modes

@pytest.mark.parametrize("mode", MODES)
def test_pages_needed_exact(mode):
    a = KVAllocator(num_pages=10, page_size=4, mode=mode)
    assert a.pages_needed("new", 0) == 0
    assert a.pages_needed("new", 1) == 1
    assert a.pages_needed("new", 9) == 3
    a.grow("s", 6)
    assert [a.pages_needed("s", n) for n in (0, 1, 2, 3, 6, 7)] == [0, 0, 0, 1, 1, 2]
    a.speculate("s", [-1, 0, 1])                     # occupies positions 6..8: 3 pages
    assert a.pages_needed("s", 3) == 0 and a.pages_needed("s", 4) == 1

    def build():
        b = KVAllocator(num_pages=10, page_size=4, mode=mode)
        b.grow("s", 6)
        b.speculate("s", [-1, 0, 1])
        b.commit("s", [0, 1])                        # 8 committed
        return b

    for n in range(0, 30):
        # naive gave page 2 back (cap 8); indexshare keeps it (cap 12)
        expect = -(-n // 4) if mode == "naive" else max(0, -(-(n - 4) // 4))
        for op in ("grow", "speculate"):
            b = build()
            need = b.pages_needed("s", n)
            assert need == expect
            assert b.can_grow("s", n) == (need <= b.free_pages())
            allocs = b.stats.page_allocs
            fn = (lambda: b.grow("s", n)) if op == "grow" else \
                (lambda: b.speculate("s", list(range(-1, n - 1))))
            if need <= b.free_pages():
                fn()
                assert b.stats.page_allocs - allocs == need
            else:
                with pytest.raises(OutOfPages):
                    fn()


@pytest.mark.parametrize("mode", MODES)
def test_out_of_pages_is_atomic(mode):
    a = KVAllocator(num_pages=4, page_size=2, mode=mode)
    a.grow("s", 3)
    a.grow("t", 1)
    snap = snapshot(a)
    with pytest.raises(OutOfPages) as ei:
        a.speculate("s", [-1, 0, 1, 2])              # needs 2 pages, 1 free
    assert ei.value.needed == 2 and ei.value.free == 1
    assert snapshot(a) == snap
    with pytest.raises(OutOfPages):
        a.grow("s", 4)
    assert snapshot(a) == snap
    with pytest.raises(OutOfPages):
        a.grow("new", 3)
    assert "new" not in a and snapshot(a) == snap
    assert not a.can_grow("s", 4) and a.can_grow("s", 3)
    a.speculate("s", [-1, 0, 1])                     # still usable afterwards
    a.check()


@pytest.mark.parametrize("mode", MODES)
def test_invalid_use(mode):
    a = KVAllocator(num_pages=8, page_size=4, mode=mode)
    with pytest.raises(KeyError):
        a.speculate("nope", [-1])
    with pytest.raises(KeyError):
        a.commit("nope", [])
    with pytest.raises(KeyError):
        a.release("nope")
    with pytest.raises(KeyError):
        a.index("nope")
    a.add("s")
    with pytest.raises(ValueError):
        a.add("s")
    assert a.length("s") == 0 and list(a.index("s")) == []
    a.grow("s", 2)
    with pytest.raises(ValueError):
        a.commit("s", [])                            # nothing speculated
    with pytest.raises(ValueError):
        a.speculate("s", [0])                        # parents[0] must be -1
    with pytest.raises(ValueError):
        a.speculate("s", [-1, 1])                    # parents[i] < i
    with pytest.raises(ValueError):
        a.speculate("s", [-2])
    with pytest.raises(ValueError):
        a.grow("s", -1)
    a.speculate("s", [-1, 0, -1, 2])
    snap = snapshot(a)
    with pytest.raises(ValueError):
        a.speculate("s", [-1])                       # twice
    with pytest.raises(ValueError):
        a.grow("s", 1)                               # committed growth under speculation
    for bad in ([1], [0, 2], [2, 1], [0, 1, 1], [4], [-1], [2, 3, 0]):
        with pytest.raises(ValueError):
            a.commit("s", bad)
    assert snapshot(a) == snap
    a.commit("s", [2, 3])
    assert a.length("s") == 4
    a.speculate("s", [])                             # empty speculation is fine
    assert list(a.spec_slots("s")) == []
    a.commit("s", [])
    a.check()


@pytest.mark.parametrize("mode", MODES)
def test_stats_fragmentation_and_peak(mode):
    a = KVAllocator(num_pages=8, page_size=4, mode=mode)
    assert a.stats.fragmentation == 0.0
    a.grow("a", 5)                                   # 2 pages, 5 of 8 slots
    assert a.stats.fragmentation == pytest.approx(1 - 5 / 8)
    a.speculate("a", [-1, 0, 1])                     # 8 of 8
    assert a.stats.fragmentation == pytest.approx(0.0)
    a.grow("b", 1)
    assert a.stats.pages_in_use == 3 and a.stats.peak_pages == 3
    a.commit("a", [0])                               # a: 6 tokens in 2 pages, b: 1 in 1
    assert a.stats.used_slots == 7 and a.stats.pages_in_use == 3
    assert a.stats.fragmentation == pytest.approx(1 - 7 / 12)
    a.release("a")
    a.release("b")
    assert a.stats.pages_in_use == 0 and a.stats.peak_pages == 3
    assert a.free_pages() == 8 and a.stats.fragmentation == 0.0
    assert isinstance(a.stats, AllocatorStats)
    a.check()


# --------------------------------------------------------------------------- naive vs indexshare

def _cycles(mode, n_seqs=8, n_cycles=300, k=4, tree=False, seed=0):
    rng = random.Random(seed)
    a = KVAllocator(num_pages=4096, page_size=16, mode=mode, kv_bytes_per_token=1)
    for s in range(n_seqs):
        a.grow(s, rng.randrange(1, 200))             # prefill
    for _ in range(n_cycles):
        for s in range(n_seqs):
            if tree:
                parents = [-1, -1, 0, 1, 2, 3, 4, 5][:2 * k]   # two chains of length k
                a.speculate(s, parents)
                m = rng.randrange(0, k + 1)
                start = rng.randrange(2)
                a.commit(s, [start + 2 * j for j in range(m)])
            else:
                a.speculate(s, list(range(-1, k - 1)))
                a.commit(s, list(range(rng.randrange(0, k + 1))))
            a.grow(s, 1)                             # bonus token
    a.check()
    return a


def test_indexshare_fewer_allocator_ops_than_naive():
    naive, share = _cycles("naive"), _cycles("indexshare")
    assert [naive.length(s) for s in range(8)] == [share.length(s) for s in range(8)]
    ops_naive = naive.stats.page_allocs + naive.stats.page_frees
    ops_share = share.stats.page_allocs + share.stats.page_frees
    assert ops_share < ops_naive / 2, (ops_share, ops_naive)
    assert naive.stats.copies == 0 and share.stats.copies == 0   # chains: no copies


def test_naive_copies_for_trees_indexshare_none():
    naive, share = _cycles("naive", tree=True), _cycles("indexshare", tree=True)
    assert naive.stats.copies > 0
    assert naive.stats.kv_copy_bytes == naive.stats.copies
    assert share.stats.copies == 0 and share.stats.kv_copy_bytes == 0


# --------------------------------------------------------------------------- stateful model check

class KVMachine(RuleBasedStateMachine):
    """Drive the allocator against a dict model.

    Model: seq -> committed token labels, pending speculation (parents and node labels).
    ``slot_of`` records each committed label's slot when it was committed; ``mem`` is a
    simulated KV memory (slot -> label) written by grow/speculate and by the returned copies.
    """

    mode = "naive"

    @initialize(num_pages=st.integers(1, 16), page_size=st.integers(1, 5),
                kvb=st.integers(0, 3))
    def setup(self, num_pages, page_size, kvb):
        self.a = KVAllocator(num_pages, page_size, self.mode, kv_bytes_per_token=kvb)
        self.committed: dict[int, list[int]] = {}
        self.pending: dict[int, tuple[list[int], list[int]] | None] = {}
        self.slot_of: dict[int, int] = {}
        self.mem: dict[int, int] = {}
        self.next_seq = 0
        self.next_label = 0

    # helpers
    def _labels(self, n):
        out = list(range(self.next_label, self.next_label + n))
        self.next_label += n
        return out

    def _pick(self, data):
        return data.draw(st.sampled_from(sorted(self.committed)), label="seq")

    def _new_seq(self):
        sid = self.next_seq
        self.next_seq += 1
        return sid

    def _failed_unchanged(self, fn, snap):
        event("OutOfPages")
        with pytest.raises(OutOfPages):
            fn()
        assert snapshot(self.a) == snap

    # rules
    @rule()
    def add_seq(self):
        sid = self._new_seq()
        self.a.add(sid)
        self.committed[sid] = []
        self.pending[sid] = None

    @rule(data=st.data(), n=st.integers(0, 12), new=st.booleans())
    def grow(self, data, n, new):
        a = self.a
        if new or not self.committed:
            sid = self._new_seq()                    # lazily created by grow
        else:
            sid = self._pick(data)
        if self.pending.get(sid) is not None:
            with pytest.raises(ValueError):
                a.grow(sid, n)
            return
        need = a.pages_needed(sid, n)
        assert a.can_grow(sid, n) == (need <= a.free_pages())
        snap = snapshot(a)
        allocs = a.stats.page_allocs
        if need > a.free_pages():
            self._failed_unchanged(lambda: a.grow(sid, n), snap)
            assert sid in self.committed or sid not in a
            return
        slots = list(a.grow(sid, n))
        assert a.stats.page_allocs - allocs == need
        assert len(slots) == n
        if sid not in self.committed:
            self.committed[sid] = []
            self.pending[sid] = None
        labels = self._labels(n)
        for lab, s in zip(labels, slots):
            self.slot_of[lab] = s
            self.mem[s] = lab
        self.committed[sid].extend(labels)
        idx = list(a.index(sid))
        assert idx[len(idx) - n:] == slots

    @rule(data=st.data(), raw=st.lists(st.integers(0, 1000), max_size=10))
    def speculate(self, data, raw):
        if self.committed:
            self._speculate(self._pick(data), raw)

    @rule(data=st.data(), raw=st.lists(st.integers(0, 1000), max_size=10),
          choices=st.lists(st.integers(0, 1000), max_size=10))
    def speculate_then_commit(self, data, raw, choices):
        """One engine step: draft a tree and accept a path of it straight away."""
        if self.committed:
            sid = self._pick(data)
            if self._speculate(sid, raw):
                self._commit(sid, choices)

    def _speculate(self, sid, raw) -> bool:
        a = self.a
        # node i: either extends the previous node (chain-like) or hangs anywhere earlier
        parents = [i - 1 if r % 3 == 0 else r % (i + 1) - 1 for i, r in enumerate(raw)]
        if self.pending[sid] is not None:
            with pytest.raises(ValueError):
                a.speculate(sid, parents)
            return False
        n = len(parents)
        need = a.pages_needed(sid, n)
        snap = snapshot(a)
        allocs = a.stats.page_allocs
        if need > a.free_pages():
            self._failed_unchanged(lambda: a.speculate(sid, parents), snap)
            return False
        slots = list(a.speculate(sid, parents))
        assert a.stats.page_allocs - allocs == need
        assert len(slots) == n and list(a.spec_slots(sid)) == slots
        labels = self._labels(n)
        for lab, s in zip(labels, slots):
            self.mem[s] = lab
        self.pending[sid] = (parents, labels)
        return True

    def _pick_pending(self, data):
        live = sorted(s for s, p in self.pending.items() if p is not None)
        return data.draw(st.sampled_from(live), label="seq") if live else None

    @rule(data=st.data(), choices=st.lists(st.integers(0, 1000), max_size=10))
    def commit(self, data, choices):
        sid = self._pick_pending(data)
        if sid is not None:
            self._commit(sid, choices)

    def _commit(self, sid, choices):
        a = self.a
        parents, labels = self.pending[sid]
        kids: dict[int, list[int]] = {}
        for i, p in enumerate(parents):
            kids.setdefault(p, []).append(i)
        path, cur = [], -1
        for c in choices:                            # random root path, possibly empty
            ks = kids.get(cur)
            if not ks or c % 5 == 0:                 # stop with probability ~1/5
                break
            cur = ks[(c // 5) % len(ks)]
            path.append(cur)
        spec = list(a.spec_slots(sid))
        L = a.length(sid)
        copies_before = a.stats.copies
        copies = a.commit(sid, path)
        if self.mode == "naive":
            assert copies == [(spec[k], spec[j]) for j, k in enumerate(path) if k != j]
            new_slots = spec[:len(path)]
        else:
            assert copies == []
            new_slots = [spec[k] for k in path]
        assert a.stats.copies - copies_before == len(copies)
        event("commit with copies" if copies else "commit without copies")
        apply_copies(self.mem, copies)
        assert list(a.index(sid))[L:] == new_slots
        for j, k in enumerate(path):
            self.slot_of[labels[k]] = new_slots[j]
        self.committed[sid].extend(labels[k] for k in path)
        self.pending[sid] = None
        assert list(a.spec_slots(sid)) == []

    @rule(data=st.data(), bad=st.lists(st.integers(-2, 10), min_size=1, max_size=4))
    def commit_invalid(self, data, bad):
        sid = self._pick_pending(data)
        if sid is None:
            return
        parents, _ = self.pending[sid]
        prev, ok = -1, True
        for k in bad:
            if not (0 <= k < len(parents)) or parents[k] != prev:
                ok = False
                break
            prev = k
        if ok:
            return                                   # happened to be valid; skip
        snap = snapshot(self.a)
        with pytest.raises(ValueError):
            self.a.commit(sid, bad)
        assert snapshot(self.a) == snap

    @rule(data=st.data())
    def rollback(self, data):
        if not self.committed:
            return
        sid = self._pick(data)
        self.a.rollback(sid)
        self.pending[sid] = None
        assert list(self.a.spec_slots(sid)) == []

    @rule(data=st.data())
    def release(self, data):
        if not self.committed:
            return
        sid = self._pick(data)
        free = self.a.free_pages()
        owned = self.a.pages_owned(sid)
        self.a.release(sid)
        assert self.a.free_pages() == free + owned
        for lab in self.committed.pop(sid):
            del self.slot_of[lab]
        del self.pending[sid]
        assert sid not in self.a

    # invariants
    @invariant()
    def consistent(self):
        a = self.a
        a.check()                                    # internal: no double free / owner
        owned = sum(a.pages_owned(s) for s in self.committed)
        assert a.free_pages() + a.stats.pages_in_use == a.num_pages
        assert a.stats.pages_in_use == owned
        assert sorted(a.seq_ids()) == sorted(self.committed)
        all_slots = []
        for sid, labels in self.committed.items():
            idx = list(a.index(sid))
            assert a.length(sid) == len(idx) == len(labels)
            for pos, lab in enumerate(labels):
                assert idx[pos] == self.slot_of[lab]     # token identity: slot stable
                assert self.mem[idx[pos]] == lab         # KV content intact
            all_slots.extend(idx)
            p = self.pending[sid]
            assert len(a.spec_slots(sid)) == (len(p[0]) if p else 0)
            all_slots.extend(a.spec_slots(sid))
        assert len(set(all_slots)) == len(all_slots)     # unique across sequences
        st_ = a.stats
        assert st_.committed_tokens == sum(len(v) for v in self.committed.values())
        assert 0.0 <= st_.fragmentation <= 1.0
        assert st_.kv_copy_bytes == st_.copies * a.kv_bytes_per_token
        if self.mode == "indexshare":
            assert st_.kv_copy_bytes == 0 and st_.copies == 0


class NaiveMachine(KVMachine):
    mode = "naive"


class IndexShareMachine(KVMachine):
    mode = "indexshare"


TestNaiveMachine = NaiveMachine.TestCase
TestIndexShareMachine = IndexShareMachine.TestCase
