"""engine.train: the training model is the engine's model; a few steps learn; resume is exact."""
import json

import numpy as np
import pytest
import torch

from engine.model import reference_forward
from engine.target import TargetConfig, TargetModel, engine_model, load_target, split_state
from engine.train import Trainer, TrainConfig, evaluate

TINY = TargetConfig(name="t", layers=2, hidden=32, heads=4, kv_heads=2, head_dim=8, ffn=48, vocab=61, mtp=2)


def _streams(seed=0, n=6000):
    """Two learnable 'domains': a noisy counter and a repeated random phrase."""
    rng = np.random.default_rng(seed)
    a = (np.arange(n) * 3 + (rng.random(n) < 0.05)) % 60
    phrase = np.random.default_rng(99).integers(0, 60, size=23)  # the same phrase in both splits
    b = np.tile(phrase, n // 23 + 1)[:n]
    return {"code": a.astype(np.uint16), "text": b.astype(np.uint16)}


def _trainer(tmp_path, **kw):
    t = TrainConfig(**{"seq_len": 32, "batch": 4, "max_tokens": 40 * 128, "lr": 1e-2, "warmup_steps": 5,
                       "eval_windows": 4, **kw})
    return Trainer(TINY, t, _streams(), _streams(1, 600), tmp_path, tmp_path / "state" / "t-resume.pt",
                   meta={"command": "test"})


def test_state_dict_is_the_engines_model(one_torch_thread):
    m = TargetModel(TINY)
    m.init_weights(0.3, torch.Generator().manual_seed(1))
    main, mtp = split_state(m.state_dict())
    assert set(main) == {"embed", "norm"} | {f"layers.{i}.{k}" for i in range(2) for k in
                                              ("attn_norm", "wqkv", "wo", "ffn_norm", "w_gate_up", "w_down")}
    assert len(mtp) == 2 * (4 + 6)
    assert sum(v.numel() for v in main.values()) == TINY.spec().params_total + TINY.spec().layers * 2 * 32 + 32
    eng = engine_model(main, TINY)
    ids = torch.randint(0, TINY.vocab, (3, 20), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        h = m.hidden(ids)
        logits = m.logits(h)
    for b in range(3):
        h_ref, l_ref, _ = reference_forward(eng, ids[b].tolist())
        torch.testing.assert_close(h[b], h_ref, atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(logits[b], l_ref, atol=1e-4, rtol=1e-4)


def test_mtp_is_causal(one_torch_thread):
    """MTP depth k at position i sees tokens up to i+k only."""
    m = TargetModel(TINY)
    m.init_weights(0.3, torch.Generator().manual_seed(3))
    ids = torch.randint(0, TINY.vocab, (1, 16), generator=torch.Generator().manual_seed(4))
    ids2 = ids.clone()
    ids2[0, 10:] = (ids2[0, 10:] + 1) % TINY.vocab
    with torch.no_grad():
        outs = []
        for x in (ids, ids2):
            h = m.hidden(x)
            h1 = m.mtp_hidden(1, h, x)
            outs.append((h, h1, m.mtp_hidden(2, h1, x)))
    torch.testing.assert_close(outs[0][0][:, :10], outs[1][0][:, :10])
    torch.testing.assert_close(outs[0][1][:, :9], outs[1][1][:, :9])  # depth 1 reads t_{i+1}
    torch.testing.assert_close(outs[0][2][:, :8], outs[1][2][:, :8])  # depth 2 reads t_{i+2}
    assert not torch.allclose(outs[0][1][:, 9], outs[1][1][:, 9])


def test_loss_decreases_and_checkpoints_load(tmp_path, one_torch_thread):
    tr = _trainer(tmp_path)
    before = evaluate(tr.model, tr.eval_set)
    tr.run(save_every=1e9, log_every=5)
    after = tr.last_eval
    for d in ("code", "text"):
        assert after[d]["loss"] < before[d]["loss"] - 0.5
        assert all(a < b for a, b in zip(after[d]["mtp_loss"], before[d]["mtp_loss"]))
    log = [json.loads(x) for x in (tmp_path / "target-log.jsonl").read_text().splitlines()]
    steps = [r for r in log if "loss" in r]
    assert [r["step"] for r in steps] == list(range(5, 41, 5)) and steps[-1]["loss"] < steps[0]["loss"]
    model, meta = load_target(tmp_path / "target.pt")
    assert meta["progress"]["step"] == 40 and meta["command"] == "test" and model.config.mtp == 2
    for k, v in tr.model.state_dict().items():
        assert torch.equal(model.state_dict()[k], v)
    ck = torch.load(tmp_path / "target.pt", weights_only=True)
    assert not any(k.startswith("mtp.") for k in ck["state_dict"])


def test_resume_is_exact(tmp_path, one_torch_thread):
    full = _trainer(tmp_path / "a", max_tokens=12 * 128)
    full.run(save_every=1e9)
    part = _trainer(tmp_path / "b", max_tokens=12 * 128)
    part.run(max_steps=5, save_every=1e9)
    again = _trainer(tmp_path / "b", max_tokens=12 * 128)
    again.resume()
    assert again.step == 5 and again.meta["resumed"] == 1
    again.run(save_every=1e9)
    assert again.step == 12
    for k, v in full.model.state_dict().items():
        assert torch.equal(again.model.state_dict()[k], v), k
    other = _trainer(tmp_path / "b", max_tokens=13 * 128)
    with pytest.raises(SystemExit):
        other.resume()


def test_lr_schedule():
    t = TrainConfig(max_tokens=1000 * 16 * 256, warmup_steps=100, lr=1e-3, min_lr_frac=0.1)
    assert t.total_steps == 1000
    assert t.lr_at(0) == pytest.approx(1e-5) and t.lr_at(99) == pytest.approx(1e-3)
    assert t.lr_at(1000) == pytest.approx(1e-4) and t.lr_at(550) == pytest.approx(0.55e-3)
