"""The family's drafters: the engine runs exactly the modules engine/train_drafters.py trains,
and a few training steps learn, checkpoint and resume (the real run never happens in CI)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from engine.drafter_nets import MedusaHeads, new_drafters
from engine.drafting.heads import FeatureHead
from engine.drafting.heads import MedusaHeads as EngineMedusa
from engine.drafting.store import DraftCache, Row, pack
from engine.target import TargetConfig, TargetModel, engine_model
from engine.train_drafters import DrafterTrainConfig, DrafterTrainer, eagle_steps, teacher

TINY = TargetConfig(name="t", layers=2, hidden=32, heads=4, kv_heads=2, head_dim=8, ffn=48, vocab=61, mtp=0)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _target(seed=1):
    m = TargetModel(TINY)
    m.init_weights(0.3, torch.Generator().manual_seed(seed))
    return m.eval()


def test_engine_eagle_head_is_the_trained_module():
    """Teacher-forced with the target's features, the engine's head pass over a sequence (its
    drafter KV layout, positions, input projection) gives the training module's features."""
    target = _target()
    d = new_drafters(TINY, torch.Generator().manual_seed(2), std=0.2)
    ids = torch.randint(0, TINY.vocab, (1, 24), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        h, _ = teacher(target, ids)
        (f1,) = eagle_steps(target, d.eagle, h, ids, 1)  # (1, 23, H) entries 0..22
    eng = engine_model(target.state_dict(), TINY)
    head = FeatureHead.from_state(eng, d.eagle.state_dict())
    cache = DraftCache(head.model.spec, rows=2, page_size=8)
    n = 23
    idx = cache.committed(torch.arange(n) + 5)  # arbitrary committed slots
    cache.ensure(int(idx.max()))
    # in two passes, as the engine catches up: entries 0..14, then 15..22
    out = []
    for a, b in ((0, 15), (15, n)):
        step, (sp,) = pack([Row(index=idx[:b], first=a)], "cpu")
        x = head.inputs(h[0, a:b], ids[0, a + 1:b + 1])
        hidden, logits = head.model.forward(step, cache, inputs=x)
        out.append(hidden[sp.start:sp.mid])
        torch.testing.assert_close(logits[sp.lstart], hidden[sp.mid - 1] @ eng.embed.T, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(torch.cat(out), f1[0], atol=2e-5, rtol=1e-4)


def test_engine_medusa_heads_are_the_trained_heads():
    target = _target()
    heads = MedusaHeads(TINY.hidden, 3)
    with torch.no_grad():
        heads.w.normal_(0, 0.3, generator=torch.Generator().manual_seed(4))
        heads.b.normal_(0, 0.3, generator=torch.Generator().manual_seed(5))
    eng = engine_model(target.state_dict(), TINY)
    h = torch.randn(5, TINY.hidden, generator=torch.Generator().manual_seed(6))
    want = target.logits(heads(h))  # (3, 5, V)
    got = EngineMedusa(eng, heads.w.detach(), heads.b.detach()).logits(h)
    torch.testing.assert_close(got, want.detach(), atol=1e-5, rtol=1e-5)


def _streams(seed=0, n=5000):
    rng = np.random.default_rng(seed)
    a = (np.arange(n) * 3 + (rng.random(n) < 0.05)) % 60
    b = np.tile(np.random.default_rng(99).integers(0, 60, size=23), n // 23 + 1)[:n]
    return {"code": a.astype(np.uint16), "text": b.astype(np.uint16)}


def test_a_few_steps_learn_save_and_resume(tmp_path):
    cfg = DrafterTrainConfig(seq_len=32, batch=4, max_tokens=40 * 128, lr=1e-2, warmup_steps=2, eval_windows=2)
    state = tmp_path / "state" / "drafters-resume.pt"

    def trainer():
        return DrafterTrainer(cfg, _target(), _streams(), _streams(1, 600), tmp_path, state, {"command": "test"})

    tr = trainer()
    first = tr.train_step()
    for _ in range(14):
        last = tr.train_step()
    assert all(np.isfinite(v) for v in last.values())
    assert last["eagle1"] < first["eagle1"] and last["draft"] < first["draft"] and last["medusa1"] < first["medusa1"]
    tr.checkpoint()
    for name in ("eagle.pt", "medusa.pt", "draft.pt"):
        ck = torch.load(tmp_path / name, weights_only=True)
        assert ck["format"] == "specsim-drafter" and ck["progress"]["step"] == 15
    torch.manual_seed(0)
    nxt = tr.train_step()
    again = trainer()
    again.resume()
    assert again.step == 15
    torch.manual_seed(0)
    assert again.train_step() == pytest.approx(nxt, rel=1e-5)
