"""engine.model: the batched paged forward equals a dense reference forward (plain causal attention
over the whole sequence) for prefill chunks, decode tokens, chain verify and tree verify, with
tied and untied heads, GQA and MHA; every kind of query in the same batch."""
from __future__ import annotations

import random

import pytest
import torch

from engine.kv_cache import KVCache
from engine.model import Model, SeqQuery, StepBatch, reference_forward
from sim.models import ModelSpec
from sim import trees as T


pytestmark = pytest.mark.usefixtures("one_torch_thread")

ATOL = 2e-4


def tiny(kv_heads=2, tied=True, layers=2, heads=4) -> ModelSpec:
    return ModelSpec("tiny", layers=layers, hidden=64, heads=heads, kv_heads=kv_heads, head_dim=16, ffn=128,
                     vocab=512, tied_embeddings=tied, bytes_per_weight=4, bytes_per_kv=4)


class Seq:
    """A sequence with slots scattered over the pages (as a paged allocator leaves them)."""

    def __init__(self, pool: list[int], tokens: list[int]):
        self.pool = pool
        self.tokens = tokens  # the whole text this test will feed
        self.index: list[int] = []

    def take(self, n: int) -> list[int]:
        out = self.pool[-n:]
        del self.pool[-n:]
        return out

    def chunk(self, n: int, logits=True) -> SeqQuery:
        ctx = len(self.index)
        self.index += self.take(n)
        return SeqQuery(tokens=self.tokens[ctx:ctx + n], ctx=ctx, index=list(self.index), logits=logits)

    def verify(self, nodes: list[int], parents: tuple[int, ...]) -> SeqQuery:
        """The next committed token as the query, then a draft tree (slots not committed)."""
        q = self.chunk(1)
        q.nodes, q.parents, q.spec_slots = nodes, parents, self.take(len(nodes))
        return q


def setup(spec: ModelSpec, seed=0):
    model = Model.random(spec, seed)
    cache = KVCache(spec, num_pages=64, page_size=8)
    pool = list(range(cache.num_slots))
    random.Random(seed).shuffle(pool)
    return model, cache, pool


def rand_tokens(rng: random.Random, n: int) -> list[int]:
    return [rng.randrange(512) for _ in range(n)]


def dense_rows(model, tokens):
    hidden, logits, _ = reference_forward(model, tokens)
    return hidden, logits


@pytest.mark.parametrize("kv_heads,tied", [(2, True), (2, False), (1, True), (4, False)])
def test_prefill_chunks_and_decode_match_dense(kv_heads, tied):
    spec = tiny(kv_heads=kv_heads, tied=tied)
    model, cache, pool = setup(spec)
    rng = random.Random(1)
    a, b, c = (Seq(pool, rand_tokens(rng, 40)) for _ in range(3))
    # step 1: a's first chunk, b's whole prompt; step 2: a's second chunk (no logits), b decodes,
    # c prefills; step 3: all three decode / finish in one batch
    steps = [
        [(a, a.chunk(9)), (b, b.chunk(13))],
        [(a, a.chunk(6, logits=False)), (b, b.chunk(1)), (c, c.chunk(17))],
        [(a, a.chunk(1)), (b, b.chunk(1)), (c, c.chunk(1))],
    ]
    for step in steps:
        batch = StepBatch.pack([q for _, q in step])
        hidden, logits = model.forward(batch, cache)
        assert hidden.shape == (batch.num_tokens, spec.hidden) and logits.shape[1] == spec.vocab
        for (seq, q), r0, l0 in zip(step, batch.row_start, batch.logit_start):
            end = q.ctx + len(q.tokens)
            h_ref, lg_ref = dense_rows(model, seq.tokens[:end])
            torch.testing.assert_close(hidden[r0:r0 + len(q.tokens)], h_ref[q.ctx:end], atol=ATOL, rtol=1e-4)
            if q.logits:
                torch.testing.assert_close(logits[l0], lg_ref[end - 1], atol=ATOL, rtol=1e-4)
            else:
                assert l0 == -1


def _check_tree(model, seq: Seq, q: SeqQuery, batch: StepBatch, b: int, hidden, logits):
    """Each node's logits (and hidden state) = the dense forward of context + root path to it."""
    ctx_tokens = seq.tokens[:q.ctx + 1]
    _, lg_root = dense_rows(model, ctx_tokens)
    l0, r0 = batch.logit_start[b], batch.row_start[b]
    torch.testing.assert_close(logits[l0], lg_root[-1], atol=ATOL, rtol=1e-4)
    for i in range(len(q.nodes)):
        path, j = [], i
        while j >= 0:
            path.append(q.nodes[j])
            j = q.parents[j]
        h_ref, lg_ref = dense_rows(model, ctx_tokens + path[::-1])
        torch.testing.assert_close(logits[l0 + 1 + i], lg_ref[-1], atol=ATOL, rtol=1e-4)
        torch.testing.assert_close(hidden[r0 + 1 + i], h_ref[-1], atol=ATOL, rtol=1e-4)


@pytest.mark.parametrize("tied", [True, False])
def test_chain_and_tree_verify_match_dense_paths(tied):
    spec = tiny(kv_heads=2, tied=tied)
    model, cache, pool = setup(spec, seed=3)
    rng = random.Random(4)
    chain_seq, tree_seq, pre = (Seq(pool, rand_tokens(rng, 40)) for _ in range(3))
    model.forward(StepBatch.pack([chain_seq.chunk(11), tree_seq.chunk(20)]), cache)
    tree = (-1, -1, 0, 0, 1, 2, 2, 4, -1)  # three root children, depth up to 4
    qc = chain_seq.verify(rand_tokens(rng, 5), T.chain(5))
    qt = tree_seq.verify(rand_tokens(rng, len(tree)), tree)
    qp = pre.chunk(12)  # a prefill in the same step
    batch = StepBatch.pack([qc, qp, qt])
    hidden, logits = model.forward(batch, cache)
    _check_tree(model, chain_seq, qc, batch, 0, hidden, logits)
    _check_tree(model, tree_seq, qt, batch, 2, hidden, logits)
    _, lg_pre = dense_rows(model, pre.tokens[:12])
    torch.testing.assert_close(logits[batch.logit_start[1]], lg_pre[-1], atol=ATOL, rtol=1e-4)


def test_tree_positions_follow_depth_not_layout():
    """A node's RoPE position is ctx + q - 1 + depth; its layout position is after its elders."""
    q = SeqQuery(tokens=[5], ctx=3, index=[10, 11, 12, 13], nodes=[1, 2, 3], parents=(-1, -1, 1),
                 spec_slots=[20, 21, 22])
    b = StepBatch.pack([q])
    assert b.rope_pos.tolist() == [3, 4, 4, 5]
    assert b.q_pos.tolist() == [3, 4, 5, 6]
    assert b.tree_start.tolist() == [4]
    assert b.q_anc.tolist() == [0, 0b001, 0b010, 0b110]
    assert b.store_slots.tolist() == [13, 20, 21, 22]
    assert b.kv_slots.tolist() == [[10, 11, 12, 13, 20, 21, 22]]
    assert b.logit_rows.tolist() == [0, 1, 2, 3]


def test_dense_models_only():
    moe = ModelSpec("moe", layers=2, hidden=64, heads=4, kv_heads=2, head_dim=16, ffn=128, vocab=512,
                    experts=8, active_experts=2, expert_ffn=32)
    with pytest.raises(ValueError, match="dense"):
        Model.random(moe, 0)
    mla = ModelSpec("mla", layers=2, hidden=64, heads=4, kv_heads=1, head_dim=16, ffn=128, vocab=512,
                    attention="mla", kv_lora_rank=32, rope_dim=8)
    with pytest.raises(ValueError, match="dense"):
        Model.random(mla, 0)


def test_random_weights_are_seeded():
    spec = tiny()
    a, b, c = Model.random(spec, 7), Model.random(spec, 7), Model.random(spec, 8)
    assert torch.equal(a.layers[1].wqkv, b.layers[1].wqkv)
    assert not torch.equal(a.layers[1].wqkv, c.layers[1].wqkv)
    assert a.lm_head is a.embed and not Model.random(tiny(tied=False), 7).lm_head is None


def test_rope_grows_and_keeps_relative_positions():
    from engine.model import Rope
    rope = Rope(16, 500_000.0, "cpu")
    rope.ensure(9000)
    assert rope.cos.shape[0] > 9000
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(1, 2, 16, generator=g), torch.randn(1, 2, 16, generator=g)
    dot = lambda a, b: (rope(q, torch.tensor([a])) * rope(k, torch.tensor([b]))).sum()  # noqa: E731
    torch.testing.assert_close(dot(8990, 8000), dot(990, 0), atol=1e-4, rtol=1e-4)  # depends on a - b only
    torch.testing.assert_close(rope(q, torch.tensor([0])), q)
