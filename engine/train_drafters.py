"""Train the family's drafters (engine/drafter_nets.py) against the frozen target.

Each step draws corpus windows as engine/train.py does, runs the frozen target once (its
features h and next-token distribution p), and trains all three drafters on them:

* EAGLE head: SmoothL1(f, h) + 0.5 * CE(p, f E^T) on real features with uniform noise
  (EAGLE §4.2), then the same loss one step unrolled on its own predicted features (so depth 2+
  drafts see inputs like those at inference; HASS, arXiv:2408.15766, trains this way too),
  weighted 0.5;
* Medusa head k: CE(p_{i+k}, head_k(h_i) E^T), on a random half of the positions;
* the draft model: CE(p, its logits).
CE(p, .) is the cross-entropy against the target's distribution (distillation).

Files: `<out>/eagle.pt`, `<out>/medusa.pt`, `<out>/draft.pt` (each: format, kind, config, state
dict, progress, evaluation, command), written atomically every --save-every seconds; the loss
curve in `<out>/drafters-log.jsonl`; optimizer state for --resume in data/train.

    nice -n 10 python -m engine.train_drafters --threads 2 --max-tokens 6000000
"""
from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # see engine/__main__.py

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import shlex  # noqa: E402
import signal  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from dataclasses import asdict, dataclass, fields  # noqa: E402
from pathlib import Path  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from engine.corpus import FAMILY_DIR  # noqa: E402
from engine.drafter_nets import DrafterSet, new_drafters  # noqa: E402
from engine.target import TargetModel, load_target  # noqa: E402
from engine.train import Sampler, Schedule, _atomic_save, eval_windows, token_streams  # noqa: E402

FORMAT = "specsim-drafter"


@dataclass(frozen=True)
class DrafterTrainConfig(Schedule):
    seq_len: int = 256
    batch: int = 16
    max_tokens: int = 6_000_000
    lr: float = 2e-3
    min_lr_frac: float = 0.1
    warmup_steps: int = 100
    weight_decay: float = 0.0
    grad_clip: float = 1.0
    feature_noise: float = 0.1  # uniform (-a, a) added to the target features fed to the EAGLE head
    medusa_positions: float = 0.5  # fraction of positions Medusa's loss uses
    seed: int = 1
    eval_windows: int = 16


def soft_ce(logits: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of logits (..., V) against the distribution p (..., V), mean over rows."""
    return -(p * F.log_softmax(logits, dim=-1)).sum(-1).mean()


@torch.no_grad()
def teacher(target: TargetModel, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """ids (B, T) -> (h (B, T, H) after the final norm, p (B, T, V) next-token distribution)."""
    h = target.hidden(ids)
    return h, torch.softmax(target.logits(h), dim=-1)


def eagle_steps(target: TargetModel, eagle, h: torch.Tensor, ids: torch.Tensor, unroll: int,
                noise: float = 0.0, generator: torch.Generator | None = None) -> list[torch.Tensor]:
    """The EAGLE head run `unroll` times; step s (1-based) over positions i = 0..T-1-s, fed with
    step s-1's output (the target's features for s = 1): returns f_s (B, T-s, H) ~ h[:, s:]."""
    out, f = [], h
    T = ids.shape[1]
    for s in range(1, unroll + 1):
        n = T - s
        x = f[:, :n]
        if s == 1 and noise > 0:
            x = x + (torch.rand(x.shape, generator=generator) * 2 - 1) * noise
        cos, sin = target._tables(n)
        f = eagle(x, target.embed[ids[:, s:s + n]], cos, sin)
        out.append(f)
    return out


def losses(target: TargetModel, d: DrafterSet, ids: torch.Tensor, cfg: DrafterTrainConfig,
           generator: torch.Generator) -> dict[str, torch.Tensor]:
    h, p = teacher(target, ids)
    E = target.embed.detach()
    out = {}
    for s, f in enumerate(eagle_steps(target, d.eagle, h, ids, 2, cfg.feature_noise, generator), start=1):
        out[f"eagle{s}"] = F.smooth_l1_loss(f, h[:, s:]) + 0.5 * soft_ce(f @ E.T, p[:, s:])
    K, T = d.medusa.heads, ids.shape[1]
    n = T - K
    pick = torch.randperm(n, generator=generator)[:max(1, int(n * cfg.medusa_positions))]  # (P,)
    hm = d.medusa(h[:, pick])  # (K, B, P, H)
    for k in range(1, K + 1):
        out[f"medusa{k}"] = soft_ce(hm[k - 1] @ E.T, p[:, pick + k])
    out["draft"] = soft_ce(d.draft.logits(d.draft.hidden(ids)), p)
    return out


def total(parts: dict[str, torch.Tensor]) -> torch.Tensor:
    return sum(v * (0.5 if k == "eagle2" else 1.0) for k, v in parts.items())


@torch.no_grad()
def evaluate(target: TargetModel, d: DrafterSet, windows: dict[str, torch.Tensor], batch: int = 8) -> dict:
    """Teacher-forced greedy agreement with the target, per domain: EAGLE at depth 1 (real
    features) and 2 (its own), Medusa head k at offset k, the draft model's next token."""
    res = {}
    for dom, win in windows.items():
        agree: dict[str, float] = {}
        count: dict[str, int] = {}

        def add(key, a, b):
            agree[key] = agree.get(key, 0.0) + (a == b).sum().item()
            count[key] = count.get(key, 0) + a.numel()

        for i in range(0, win.shape[0], batch):
            ids = win[i:i + batch, :-1]
            h, p = teacher(target, ids)
            g = p.argmax(-1)  # (B, T) the target's greedy next token per position
            for s, f in enumerate(eagle_steps(target, d.eagle, h, ids, 2), start=1):
                add(f"eagle{s}", target.logits(f).argmax(-1), g[:, s:])
            K, T = d.medusa.heads, ids.shape[1]
            hm = d.medusa(h[:, :T - K])
            for k in range(1, K + 1):
                add(f"medusa{k}", target.logits(hm[k - 1]).argmax(-1), g[:, k:T - K + k])
            add("draft", d.draft.logits(d.draft.hidden(ids)).argmax(-1), g)
        res[dom] = {k: round(agree[k] / count[k], 4) for k in agree}
    return res


class DrafterTrainer:
    def __init__(self, cfg: DrafterTrainConfig, target: TargetModel, streams, heldout, out_dir: Path,
                 state_path: Path, meta: dict):
        self.cfg, self.target = cfg, target
        for prm in target.parameters():
            prm.requires_grad_(False)
        self.gen = torch.Generator().manual_seed(cfg.seed)
        self.d = new_drafters(target.config, self.gen)
        self.params = [p for m in (self.d.eagle, self.d.medusa, self.d.draft) for p in m.parameters()]
        self.opt = torch.optim.AdamW(self.params, lr=cfg.lr, betas=(0.9, 0.95), weight_decay=cfg.weight_decay)
        self.sampler = Sampler(streams, {"code": 0.65, "text": 0.35}, cfg.seq_len, cfg.seed)
        self.eval_set = eval_windows(heldout, cfg.eval_windows, cfg.seq_len)
        self.out_dir, self.state_path, self.meta = Path(out_dir), Path(state_path), dict(meta)
        self.step, self.train_seconds, self.last_eval = 0, 0.0, None
        self.log_path = self.out_dir / "drafters-log.jsonl"

    def train_step(self) -> dict[str, float]:
        for g in self.opt.param_groups:
            g["lr"] = self.cfg.lr_at(self.step)
        ids = self.sampler.batch(self.cfg.batch)[:, :-1]
        parts = losses(self.target, self.d, ids, self.cfg, self.gen)
        loss = total(parts)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.params, self.cfg.grad_clip)
        self.opt.step()
        self.step += 1
        return {k: v.item() for k, v in parts.items()}

    def save(self) -> None:
        progress = {"step": self.step, "tokens": self.step * self.cfg.tokens_per_step,
                    "total_steps": self.cfg.total_steps, "train_seconds": round(self.train_seconds, 1)}
        common = {"format": FORMAT, "version": 1, "train": asdict(self.cfg), "progress": progress,
                  "eval": self.last_eval, "torch": str(torch.__version__), **self.meta}
        tc = asdict(self.target.config)
        _atomic_save({**common, "kind": "eagle", "model": tc, "state_dict": self.d.eagle.state_dict()},
                     self.out_dir / "eagle.pt")
        _atomic_save({**common, "kind": "medusa", "model": tc, "heads": self.d.medusa.heads,
                      "state_dict": self.d.medusa.state_dict()}, self.out_dir / "medusa.pt")
        dc = self.d.draft.config
        _atomic_save({**common, "kind": "draft", "model": asdict(dc), "spec": dc.spec().to_dict(),
                      "state_dict": self.d.draft.state_dict()}, self.out_dir / "draft.pt")
        _atomic_save({"train": asdict(self.cfg), "step": self.step, "train_seconds": self.train_seconds,
                      "last_eval": self.last_eval, "optimizer": self.opt.state_dict(),
                      "drafters": {k: getattr(self.d, k).state_dict() for k in ("eagle", "medusa", "draft")},
                      "sampler": self.sampler.rng.bit_generator.state, "gen": self.gen.get_state(), "meta": self.meta},
                     self.state_path)

    def resume(self) -> None:
        st = torch.load(self.state_path, map_location="cpu", weights_only=False)
        if st["train"] != asdict(self.cfg):
            raise SystemExit(f"{self.state_path} was made with another configuration: {st['train']}")
        for k in ("eagle", "medusa", "draft"):
            getattr(self.d, k).load_state_dict(st["drafters"][k])
        self.opt.load_state_dict(st["optimizer"])
        self.sampler.rng.bit_generator.state = st["sampler"]
        self.gen.set_state(st["gen"])
        self.step, self.train_seconds, self.last_eval = st["step"], st["train_seconds"], st["last_eval"]
        self.meta["command"] = st["meta"].get("command", self.meta.get("command"))
        if self.log_path.exists():
            keep = [ln for ln in self.log_path.read_text().splitlines() if ln and json.loads(ln)["step"] <= self.step]
            self.log_path.write_text("".join(ln + "\n" for ln in keep))

    def log(self, rec: dict) -> None:
        with self.log_path.open("a") as f:
            f.write(json.dumps(rec) + "\n")

    def checkpoint(self) -> None:
        self.last_eval = {"step": self.step, **evaluate(self.target, self.d, self.eval_set)}
        self.log({"step": self.step, "eval": self.last_eval})
        print(time.strftime("%H:%M:%S"), "eval", json.dumps(self.last_eval), flush=True)
        self.save()

    def run(self, max_steps: int | None, save_every: float, log_every: int = 10) -> None:
        stop = {"flag": False}
        old = {s: signal.signal(s, lambda *_: stop.update(flag=True)) for s in (signal.SIGTERM, signal.SIGINT)}
        end = self.cfg.total_steps if max_steps is None else min(self.cfg.total_steps, self.step + max_steps)
        last_save, acc, n, t = time.monotonic(), {}, 0, 0.0
        try:
            while self.step < end and not stop["flag"]:
                t0 = time.perf_counter()
                parts = self.train_step()
                dt = time.perf_counter() - t0
                self.train_seconds += dt
                t += dt
                n += 1
                if not all(math.isfinite(v) for v in parts.values()):
                    raise FloatingPointError(f"loss became {parts} at step {self.step}")
                acc = {k: acc.get(k, 0.0) + v for k, v in parts.items()}
                if self.step % log_every == 0 or self.step == end:
                    rec = {"step": self.step, "tokens": self.step * self.cfg.tokens_per_step,
                           "lr": round(self.cfg.lr_at(self.step - 1), 6),
                           **{k: round(v / n, 4) for k, v in acc.items()},
                           "tok_s": round(n * self.cfg.tokens_per_step / t, 1)}
                    self.log(rec)
                    left = (self.cfg.total_steps - self.step) * self.cfg.tokens_per_step / max(rec["tok_s"], 1e-9)
                    print(time.strftime("%H:%M:%S"), f"step {self.step}/{self.cfg.total_steps}",
                          " ".join(f"{k} {v}" for k, v in rec.items() if k not in ("step",)),
                          f"eta {left / 60:.0f} min", flush=True)
                    acc, n, t = {}, 0, 0.0
                if time.monotonic() - last_save >= save_every:
                    self.checkpoint()
                    last_save = time.monotonic()
            self.checkpoint()
        finally:
            for s, h in old.items():
                signal.signal(s, h)


def main(argv: list[str] | None = None) -> int:
    dc = DrafterTrainConfig()
    p = argparse.ArgumentParser(prog="python -m engine.train_drafters", description=__doc__.split("\n\n")[0])
    for f in fields(DrafterTrainConfig):
        p.add_argument(f"--{f.name.replace('_', '-')}", type=type(getattr(dc, f.name)), default=getattr(dc, f.name))
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--target", type=Path, default=FAMILY_DIR / "target.pt")
    p.add_argument("--out", type=Path, default=FAMILY_DIR)
    p.add_argument("--state-dir", type=Path, default=None)
    p.add_argument("--resume", action="store_true")
    p.add_argument("--save-every", type=float, default=600.0)
    p.add_argument("--max-steps", type=int, default=None)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    from engine.corpus import data_dir

    cfg = DrafterTrainConfig(**{f.name: getattr(args, f.name) for f in fields(DrafterTrainConfig)})
    state_dir = args.state_dir if args.state_dir is not None else data_dir() / "train"
    state_path = state_dir / "drafters-resume.pt"
    if args.resume and not state_path.exists():
        print(f"error: no resume state at {state_path}", file=sys.stderr)
        return 2
    target, tmeta = load_target(args.target)
    target.eval()
    train, held = token_streams("train"), token_streams("heldout")
    command = "python -m engine.train_drafters " + " ".join(shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv))
    meta = {"family": target.config.name, "target_step": tmeta["progress"]["step"], "command": command}
    tr = DrafterTrainer(cfg, target, train, held, args.out, state_path, meta)
    if args.resume:
        tr.resume()
    elif tr.log_path.exists():
        tr.log_path.unlink()
    print(f"drafters for {target.config.name} (target step {meta['target_step']}): "
          f"{cfg.total_steps} steps of {cfg.tokens_per_step} tokens from step {tr.step}", file=sys.stderr, flush=True)
    tr.run(args.max_steps, args.save_every)
    return 0


if __name__ == "__main__":
    sys.exit(main())
