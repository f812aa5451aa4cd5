"""engine.kv_cache over sim's allocator: across random schedules of append / speculate (chains and
trees) / commit / rollback / release in both paging modes, with many sequences in each batched
step and pages recycled between sequences, every committed token's K and V in the paged cache
equal a dense recompute over the sequence's committed tokens."""
from __future__ import annotations

import random

import pytest
import torch

from engine.kv_cache import KVCache, pages_bound
from engine.model import Model, SeqQuery, StepBatch, reference_forward
from sim.kv import KVAllocator
from sim.models import ModelSpec


pytestmark = pytest.mark.usefixtures("one_torch_thread")

SPEC = ModelSpec("tiny", layers=2, hidden=64, heads=4, kv_heads=2, head_dim=16, ffn=128, vocab=512,
                 tied_embeddings=False, bytes_per_weight=4, bytes_per_kv=4)
PAGE = 4
PAGES = 40


@pytest.fixture(scope="module")
def model():
    return Model.random(SPEC, 5)


def random_tree(rng: random.Random, n: int) -> tuple[int, ...]:
    if rng.random() < 0.4:
        return tuple(range(-1, n - 1))  # a chain
    return tuple(rng.randrange(-1, i) for i in range(n))


def random_root_path(rng: random.Random, parents) -> list[int]:
    path, cur = [], -1
    while True:
        kids = [i for i, p in enumerate(parents) if p == cur]
        if not kids or rng.random() < 0.25:
            return path
        cur = rng.choice(kids)
        path.append(cur)


def check_intact(model, cache, kv, committed: dict[int, list[int]]):
    for sid, toks in committed.items():
        index = list(kv.index(sid))
        assert len(index) == len(toks)
        if not toks:
            continue
        _, _, kvs = reference_forward(model, toks)
        for layer, (k_ref, v_ref) in enumerate(kvs):
            k, v = cache.gather(index, layer)
            torch.testing.assert_close(k, k_ref, atol=2e-4, rtol=1e-4)
            torch.testing.assert_close(v, v_ref, atol=2e-4, rtol=1e-4)


@pytest.mark.parametrize("mode", ["naive", "indexshare"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_committed_kv_survives_random_schedules(model, mode, seed):
    rng = random.Random(seed)
    kv = KVAllocator(PAGES, PAGE, mode, kv_bytes_per_token=1)
    cache = KVCache(SPEC, PAGES, PAGE)
    committed: dict[int, list[int]] = {}  # sequence -> its committed tokens
    next_id = 0
    copies_seen = 0
    for _ in range(14):
        # a step: some sequences append a chunk, some decode one token and verify a draft tree,
        # some place a draft tree without a new committed token; new sequences start
        queries, specs = [], []
        for sid in list(committed):
            if rng.random() < 0.15:  # finished or preempted: its pages go back to the pool
                kv.release(sid)
                del committed[sid]
                continue
            if rng.random() < 0.3:
                continue
            kind = rng.choice(["append", "verify", "verify", "tree-only"])
            n_nodes = rng.randint(1, 7) if kind != "append" else 0
            q = rng.randint(1, 9) if kind == "append" else (1 if kind == "verify" else 0)
            if kv.pages_needed(sid, q + n_nodes) > kv.free_pages():
                continue
            ctx = len(committed[sid])
            new = [rng.randrange(512) for _ in range(q)]
            kv.grow(sid, q)
            committed[sid] += new
            query = SeqQuery(tokens=new, ctx=ctx, index=list(kv.index(sid)), logits=q > 0)
            if n_nodes:
                parents = random_tree(rng, n_nodes)
                query.nodes = [rng.randrange(512) for _ in range(n_nodes)]
                query.parents, query.spec_slots = parents, list(kv.speculate(sid, parents))
                specs.append((sid, parents, query.nodes))
            queries.append(query)
        while len(committed) < 5 and rng.random() < 0.7:
            n = rng.randint(1, 14)
            if kv.pages_needed(next_id, n) > kv.free_pages():
                break
            toks = [rng.randrange(512) for _ in range(n)]
            kv.grow(next_id, n)
            committed[next_id] = toks
            queries.append(SeqQuery(tokens=toks, ctx=0, index=list(kv.index(next_id))))
            next_id += 1
        if not queries:
            continue
        model.forward(StepBatch.pack(queries), cache)
        for sid, parents, nodes in specs:
            if rng.random() < 0.2:
                kv.rollback(sid)
                continue
            path = random_root_path(rng, parents)
            copies = kv.commit(sid, path)
            cache.copy(copies)
            copies_seen += len(copies)
            committed[sid] += [nodes[i] for i in path]
        kv.check()
        check_intact(model, cache, kv, committed)
    if mode == "indexshare":
        assert copies_seen == 0
    assert next_id > 3


def test_copy_matches_ordered_copies():
    cache = KVCache(SPEC, 4, PAGE)
    cache.data.copy_(torch.randn_like(cache.data))
    ref = cache.data.clone().view(SPEC.layers, 2, 4 * PAGE, SPEC.kv_heads, SPEC.head_dim)
    copies = [(5, 3), (3, 1), (9, 4)]  # the second reads what the first wrote: must run in order
    for s, d in copies:
        ref[:, :, d] = ref[:, :, s]
    cache.copy(copies)
    assert torch.equal(cache._flat, ref)


def test_commit_hands_the_engine_its_copies_and_bounds():
    """The scheduler's commit puts the naive allocator's KV copies on the batch, in order."""
    from sim.scheduler import Scheduler
    from sim.spec import ServingSpec
    from sim.workload import Request

    class Tree:
        parents = (-1, -1, 1)

    class Planner:
        def plan(self, seqs):
            return [Tree() for _ in seqs]

    sched = Scheduler(ServingSpec(page_size=4, paging="naive"), 16, 8, planner=Planner(), max_nodes=3)
    sched.add(Request(0, 0.0, 3, 10), 0.0)
    first = sched.schedule(0.0)  # prefill of 3 tokens, samples the first token
    sched.commit(first, None, 0.0)
    step = sched.schedule(0.0)  # decode: 1 query token + the 3-node tree at positions 4, 5, 6
    spec = step.slots[0][1:]
    sched.commit(step, [[1, 2]], 0.0)  # node 1 -> position 4, node 2 -> position 5
    assert step.copies == [(spec[1], spec[0]), (spec[2], spec[1])]
    assert pages_bound([10, 3, 7], 4, 2, 100) == 3 + 2
    assert pages_bound([10, 3, 7], 4, 2, 4) == 4


def test_cache_grows_on_demand():
    cache = KVCache(SPEC, 2, PAGE)
    k, _ = cache.layer(1)
    k[3] = 1.0
    cache.ensure(2 * PAGE * 3)
    assert cache.num_pages >= 7
    assert torch.all(cache.layer(1)[0][3] == 1.0)


def test_slot_tables_follow_the_allocator():
    from engine.kv_cache import SlotTables
    kv = KVAllocator(32, 4, "indexshare")
    tables = SlotTables()
    kv.grow(0, 5)
    assert tables.row(0, kv.index(0)).tolist() == list(kv.index(0))
    kv.grow(0, 70)  # past the first buffer
    kv.speculate(0, (-1, 0))
    kv.commit(0, [0])
    assert tables.row(0, kv.index(0)).tolist() == list(kv.index(0))
    kv.release(0)  # preempted: placed again from scratch, possibly elsewhere
    kv.grow(1, 3)
    kv.grow(0, 2)
    assert tables.row(0, kv.index(0)).tolist() == list(kv.index(0))
