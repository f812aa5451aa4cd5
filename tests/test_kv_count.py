"""PageCounter is KVAllocator's page-level projection: the same random operations give the same
statistics, the same pages needed and the same OutOfPages failures, after every operation."""
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sim.kv import KVAllocator, OutOfPages
from sim.kv_count import PageCounter


def random_tree(rng: random.Random, n: int) -> tuple[int, ...]:
    return tuple(rng.randrange(-1, i) for i in range(n))


def random_root_path(rng: random.Random, parents) -> list[int]:
    path, node = [], -1
    while True:
        kids = [i for i, p in enumerate(parents) if p == node]
        if not kids or rng.random() < 0.3:
            return path
        node = rng.choice(kids)
        path.append(node)


@pytest.mark.parametrize("mode", ["naive", "indexshare"])
@given(seed=st.integers(0, 10**9), pages=st.integers(1, 40), page_size=st.sampled_from([1, 2, 4, 16]))
def test_counter_matches_allocator(mode, seed, pages, page_size):
    rng = random.Random(seed)
    full, count = KVAllocator(pages, page_size, mode, 7), PageCounter(pages, page_size, mode, 7)
    live, spec = [], {}
    for _ in range(120):
        op = rng.random()
        try:
            if op < 0.3 or not live:
                sid = rng.randrange(8)
                n = rng.randrange(0, 3 * page_size + 2)
                if sid in spec:
                    continue
                outcome = _both(full, count, "grow", sid, n)
                if outcome == "ok" and sid not in live:
                    live.append(sid)
            elif op < 0.6:
                sid = rng.choice(live)
                if sid in spec:
                    continue
                tree = random_tree(rng, rng.randrange(1, 12)) if rng.random() < 0.5 else tuple(range(-1, rng.randrange(1, 6) - 1))
                if _both(full, count, "speculate", sid, tree) == "ok":
                    spec[sid] = tree
            elif op < 0.85 and spec:
                sid = rng.choice(list(spec))
                _both(full, count, "commit", sid, random_root_path(rng, spec.pop(sid)))
            elif op < 0.9 and spec:
                sid = rng.choice(list(spec))
                spec.pop(sid)
                _both(full, count, "rollback", sid)
            else:
                sid = rng.choice(live)
                live.remove(sid)
                spec.pop(sid, None)
                _both(full, count, "release", sid)
        finally:
            assert full.stats == count.stats
            assert full.free_pages() == count.free_pages()
            for sid in live:
                for n in (0, 1, page_size, 5 * page_size + 1):
                    assert full.pages_needed(sid, n) == count.pages_needed(sid, n)
                assert full.length(sid) == count.length(sid) and full.pages_owned(sid) == count.pages_owned(sid)


def _both(full, count, method, *args) -> str:
    outcomes = []
    for kv in (full, count):
        try:
            getattr(kv, method)(*args)
            outcomes.append("ok")
        except OutOfPages as exc:
            outcomes.append(f"out of pages {exc.needed}/{exc.free}")
    assert outcomes[0] == outcomes[1], (method, args, outcomes)
    return outcomes[0]


@pytest.mark.parametrize("mode", ["naive", "indexshare"])
@given(seed=st.integers(0, 10**9))
def test_decode_step_equals_grow_then_speculate(mode, seed):
    rng = random.Random(seed)
    a, b = PageCounter(200, 4, mode), PageCounter(200, 4, mode)
    start = rng.randrange(0, 9)
    a.grow(0, start)
    b.grow(0, start)
    for _ in range(30):
        n = rng.randrange(0, 10)
        a.grow(0, 1)
        if n:  # no nodes: a step that drafts nothing, grow alone
            a.speculate(0, tuple(range(-1, n - 1)))
        b.decode_step(0, n)
        assert a.stats == b.stats and a.pages_owned(0) == b.pages_owned(0)
        if n:
            m = rng.randrange(0, n + 1)
            a.commit(0, list(range(m)))
            b.commit(0, list(range(m)))
        assert a.stats == b.stats
