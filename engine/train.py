"""Pretrain the family's target model (engine/target.py) with its MTP modules as an auxiliary loss.

Data: the corpus' train split (engine/corpus.py), tokenized once and cached under data/ (as
uint16, one stream per domain, each document preceded by <|endoftext|>); each batch row is a
random window of seq_len + 1 tokens from a domain drawn by `mix`. AdamW (decay on matrices),
linear warm-up then cosine to min_lr_frac, gradient clipping, fp32.

Files: `<out>/target.pt` (the main model: config, fp32 state dict, progress, last evaluation, the
command) and `<out>/mtp.pt` (the MTP modules), each a few MB, written atomically every
`--save-every` seconds; the optimizer and sampler state for `--resume` go to
`<state-dir>/<name>-resume.pt` (git-ignored); the loss curve is appended to `<out>/target-log.jsonl`.

    nice -n 10 python -m engine.train --threads 1 --max-tokens 24000000   # resumable: --resume
"""
from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # see engine/__main__.py

import argparse  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import shlex  # noqa: E402
import signal  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from dataclasses import asdict, dataclass, field, fields  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from engine.target import (FAMILY_DIR, FORMAT, TargetConfig, TargetModel, _from_dict,  # noqa: E402
                           split_state)


# ------------------------------------------------------------------------------------ configs

class Schedule:
    """Steps and learning rate of a config with batch, seq_len, max_tokens, lr, min_lr_frac and
    warmup_steps fields (the target's and the drafters' trainers)."""

    @property
    def tokens_per_step(self) -> int:
        return self.batch * self.seq_len

    @property
    def total_steps(self) -> int:
        return max(1, math.ceil(self.max_tokens / self.tokens_per_step))

    def lr_at(self, step: int) -> float:
        """Linear warm-up over warmup_steps, then cosine from lr to lr * min_lr_frac at total_steps."""
        if step < self.warmup_steps:
            return self.lr * (step + 1) / self.warmup_steps
        t = min(1.0, (step - self.warmup_steps) / max(1, self.total_steps - self.warmup_steps))
        return self.lr * (self.min_lr_frac + (1 - self.min_lr_frac) * 0.5 * (1 + math.cos(math.pi * t)))


@dataclass(frozen=True)
class TrainConfig(Schedule):
    seq_len: int = 256
    batch: int = 16  # windows per step
    max_tokens: int = 24_000_000  # input tokens over the whole run (sets the schedule's length)
    lr: float = 2e-3
    min_lr_frac: float = 0.1
    warmup_steps: int = 200
    weight_decay: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.95
    grad_clip: float = 1.0
    mtp_weight: float = 0.3
    init_std: float = 0.02
    seed: int = 0
    mix: dict = field(default_factory=lambda: {"code": 0.65, "text": 0.35})
    eval_windows: int = 32  # held-out windows per domain



# ------------------------------------------------------------------------------------ data

def token_streams(split: str, tokenizer=None, cache_dir: Path | None = None) -> dict[str, np.ndarray]:
    """{domain: uint16 ids} of the corpus' `split`: <|endoftext|> before each document, manifest order.
    Cached under data/cache, keyed by the tokenizer and the manifest."""
    from engine.corpus import DOMAINS, data_dir, load_docs, manifest_sha256
    from engine.tokenizer import load_tokenizer

    tok = load_tokenizer() if tokenizer is None else tokenizer
    if tok.vocab_size > 65536:
        raise ValueError("uint16 streams need a vocabulary of at most 65536")
    key = hashlib.sha256((tok.sha256 + manifest_sha256()).encode()).hexdigest()[:16]
    cache = (data_dir() / "cache") if cache_dir is None else Path(cache_dir)
    paths = {d: cache / f"tokens-{d}-{split}-{key}.npy" for d in DOMAINS}
    if all(p.exists() for p in paths.values()):
        return {d: np.load(p) for d, p in paths.items()}
    docs = load_docs()
    cache.mkdir(parents=True, exist_ok=True)
    out = {}
    for d in DOMAINS:
        ids: list[int] = []
        for doc in docs:
            if doc.domain == d and doc.split == split:
                ids.append(tok.eot)
                ids.extend(tok.encode(doc.text))
        arr = np.asarray(ids, dtype=np.uint16)
        tmp = paths[d].with_suffix(".tmp.npy")
        np.save(tmp, arr)
        os.replace(tmp, paths[d])
        out[d] = arr
    return out


class Sampler:
    """Random training windows: a domain by `mix`, then a uniform start; seeded, its state saved."""

    def __init__(self, streams: dict[str, np.ndarray], mix: dict[str, float], seq_len: int, seed: int):
        self.names = [d for d in mix if d in streams and mix[d] > 0]
        if not self.names:
            raise ValueError(f"no stream for any domain of the mix {mix}")
        for d in self.names:
            if len(streams[d]) < seq_len + 2:
                raise ValueError(f"the {d} stream holds {len(streams[d])} tokens, fewer than a window")
        w = np.array([mix[d] for d in self.names], dtype=np.float64)
        self.p = w / w.sum()
        self.streams, self.T = streams, seq_len
        self.rng = np.random.default_rng(seed)

    def batch(self, n: int) -> torch.Tensor:
        rows = []
        for _ in range(n):
            s = self.streams[self.names[int(self.rng.choice(len(self.names), p=self.p))]]
            i = int(self.rng.integers(0, len(s) - self.T))
            rows.append(s[i:i + self.T + 1])
        return torch.from_numpy(np.stack(rows).astype(np.int64))


def eval_windows(streams: dict[str, np.ndarray], n: int, seq_len: int) -> dict[str, torch.Tensor]:
    """n evenly spaced windows of seq_len + 1 tokens per domain (deterministic)."""
    out = {}
    for d, s in streams.items():
        if len(s) >= seq_len + 1:
            starts = np.linspace(0, len(s) - seq_len - 1, n).astype(np.int64)
            out[d] = torch.from_numpy(np.stack([s[i:i + seq_len + 1] for i in starts]).astype(np.int64))
    return out


@torch.no_grad()
def evaluate(model: TargetModel, windows: dict[str, torch.Tensor], batch: int = 16) -> dict:
    """Per domain: main loss and top-1 accuracy; per MTP depth k its loss and `agree`: how often
    its argmax equals the main model's argmax at position i+k (a teacher-forced proxy for greedy
    acceptance of an MTP draft at depth k)."""
    model.eval()
    D, V = model.config.mtp, model.config.vocab
    res = {}
    for dom, win in windows.items():
        sums = {"loss": 0.0, "acc": 0.0, "n": 0, "mtp_loss": [0.0] * D, "agree": [0.0] * D, "mtp_n": [0] * D}
        for i in range(0, win.shape[0], batch):
            w = win[i:i + batch]
            ids, tgt = w[:, :-1], w[:, 1:]
            h = model.hidden(ids)
            lg = model.logits(h)
            greedy = lg.argmax(-1)
            sums["loss"] += F.cross_entropy(lg.reshape(-1, V), tgt.reshape(-1), reduction="sum").item()
            sums["acc"] += (greedy == tgt).sum().item()
            sums["n"] += tgt.numel()
            for k in range(1, D + 1):
                h = model.mtp_hidden(k, h, ids)
                lk = model.logits(h)
                sums["mtp_loss"][k - 1] += F.cross_entropy(lk.reshape(-1, V), tgt[:, k:].reshape(-1),
                                                           reduction="sum").item()
                sums["agree"][k - 1] += (lk.argmax(-1) == greedy[:, k:]).sum().item()
                sums["mtp_n"][k - 1] += tgt[:, k:].numel()
        res[dom] = {"loss": round(sums["loss"] / sums["n"], 4), "acc": round(sums["acc"] / sums["n"], 4),
                    "mtp_loss": [round(x / n, 4) for x, n in zip(sums["mtp_loss"], sums["mtp_n"])],
                    "mtp_agree": [round(x / n, 4) for x, n in zip(sums["agree"], sums["mtp_n"])]}
    model.train()
    return res


# ------------------------------------------------------------------------------------ checkpoints

def _atomic_save(obj, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    torch.save(obj, tmp)
    os.replace(tmp, path)


class Trainer:
    def __init__(self, mcfg: TargetConfig, tcfg: TrainConfig, streams: dict[str, np.ndarray],
                 heldout: dict[str, np.ndarray] | None, out_dir: Path, state_path: Path, meta: dict | None = None):
        self.mcfg, self.tcfg = mcfg, tcfg
        self.out_dir, self.state_path = Path(out_dir), Path(state_path)
        self.meta = dict(meta or {})
        self.model = TargetModel(mcfg)
        self.model.init_weights(tcfg.init_std, torch.Generator().manual_seed(tcfg.seed))
        decay = [p for p in self.model.parameters() if p.ndim >= 2]
        no_decay = [p for p in self.model.parameters() if p.ndim < 2]
        self.opt = torch.optim.AdamW([{"params": decay, "weight_decay": tcfg.weight_decay},
                                      {"params": no_decay, "weight_decay": 0.0}],
                                     lr=tcfg.lr, betas=(tcfg.beta1, tcfg.beta2), eps=1e-8)
        self.sampler = Sampler(streams, tcfg.mix, tcfg.seq_len, tcfg.seed)
        self.eval_set = eval_windows(heldout, tcfg.eval_windows, tcfg.seq_len) if heldout else {}
        self.step, self.train_seconds, self.last_eval = 0, 0.0, None
        self.log_path = self.out_dir / "target-log.jsonl"

    @property
    def params(self) -> dict:
        main, mtp = split_state(self.model.state_dict())
        return {"main": sum(v.numel() for v in main.values()), "mtp": sum(v.numel() for v in mtp.values())}

    # ---- one step ------------------------------------------------------------------------------
    def train_step(self) -> tuple[float, list[float]]:
        t = self.tcfg
        for g in self.opt.param_groups:
            g["lr"] = t.lr_at(self.step)
        window = self.sampler.batch(t.batch)
        main, mtp = self.model.losses(window)
        loss = main + (t.mtp_weight / len(mtp)) * sum(mtp) if mtp else main
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        if t.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), t.grad_clip)
        self.opt.step()
        self.step += 1
        return main.item(), [m.item() for m in mtp]

    # ---- state ---------------------------------------------------------------------------------
    def save(self) -> None:
        main, mtp = split_state({k: v.detach().clone() for k, v in self.model.state_dict().items()})
        progress = {"step": self.step, "tokens": self.step * self.tcfg.tokens_per_step,
                    "total_steps": self.tcfg.total_steps, "train_seconds": round(self.train_seconds, 1)}
        common = {"model": asdict(self.mcfg), "spec": self.mcfg.spec().to_dict(), "train": asdict(self.tcfg),
                  "progress": progress, "eval": self.last_eval, "torch": str(torch.__version__), **self.meta}
        _atomic_save({"format": FORMAT, "version": 1, **common, "state_dict": main}, self.out_dir / "target.pt")
        if mtp:
            _atomic_save({"format": "specsim-mtp", "version": 1, **common, "state_dict": mtp}, self.out_dir / "mtp.pt")
        _atomic_save({"format": "specsim-train-state", "version": 1, "model": asdict(self.mcfg),
                      "train": asdict(self.tcfg), "step": self.step, "train_seconds": self.train_seconds,
                      "last_eval": self.last_eval, "state_dict": self.model.state_dict(),
                      "optimizer": self.opt.state_dict(), "sampler": self.sampler.rng.bit_generator.state,
                      "meta": self.meta},
                     self.state_path)

    def resume(self) -> None:
        st = torch.load(self.state_path, map_location="cpu", weights_only=False)
        if st["model"] != asdict(self.mcfg) or st["train"] != asdict(self.tcfg):
            raise SystemExit(f"{self.state_path} was made with another configuration:\n model {st['model']}\n "
                             f"train {st['train']}\n(resume uses the stored one; pass no shape/optimizer options)")
        self.model.load_state_dict(st["state_dict"])
        self.opt.load_state_dict(st["optimizer"])
        self.sampler.rng.bit_generator.state = st["sampler"]
        self.step, self.train_seconds, self.last_eval = st["step"], st["train_seconds"], st["last_eval"]
        first = st.get("meta", {})
        if "command" in first:  # the command that reproduces the run is the one that started it
            self.meta["command"] = first["command"]
        self.meta["resumed"] = first.get("resumed", 0) + 1
        if self.log_path.exists():  # drop records written after this state was saved
            keep = [ln for ln in self.log_path.read_text().splitlines() if ln and json.loads(ln)["step"] <= self.step]
            self.log_path.write_text("".join(ln + "\n" for ln in keep))

    def log(self, record: dict) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("a") as f:
            f.write(json.dumps(record) + "\n")

    # ---- the loop ------------------------------------------------------------------------------
    def run(self, max_steps: int | None = None, save_every: float = 300.0, log_every: int = 10,
            report=None) -> None:
        """Train to total_steps (or max_steps more steps); save every save_every seconds and at
        the end (or on SIGTERM / Ctrl-C); report(trainer, record) after each log interval."""
        stop = {"flag": False}

        def on_signal(signum, frame):
            stop["flag"] = True

        old = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)} \
            if _main_thread() else {}
        end = self.tcfg.total_steps if max_steps is None else min(self.tcfg.total_steps, self.step + max_steps)
        last_save = time.monotonic()
        acc = {"loss": 0.0, "mtp": [0.0] * self.mcfg.mtp, "n": 0, "t": 0.0, "cpu": 0.0}
        try:
            while self.step < end and not stop["flag"]:
                t0, c0 = time.perf_counter(), time.process_time()
                main, mtp = self.train_step()
                dt = time.perf_counter() - t0
                acc["cpu"] += time.process_time() - c0
                self.train_seconds += dt
                acc["loss"] += main
                acc["mtp"] = [a + b for a, b in zip(acc["mtp"], mtp)]
                acc["n"] += 1
                acc["t"] += dt
                if not math.isfinite(main):
                    raise FloatingPointError(f"loss became {main} at step {self.step}")
                if self.step % log_every == 0 or self.step == end:
                    n = acc["n"]
                    rec = {"step": self.step, "tokens": self.step * self.tcfg.tokens_per_step,
                           "train_s": round(self.train_seconds, 1), "lr": self.tcfg.lr_at(self.step - 1),
                           "loss": round(acc["loss"] / n, 4), "mtp": [round(m / n, 4) for m in acc["mtp"]],
                           "tok_s": round(n * self.tcfg.tokens_per_step / acc["t"], 1),
                           "cpu_tok_s": round(n * self.tcfg.tokens_per_step / max(acc["cpu"], 1e-9), 1)}
                    self.log(rec)
                    if report:
                        report(self, rec)
                    acc = {"loss": 0.0, "mtp": [0.0] * self.mcfg.mtp, "n": 0, "t": 0.0, "cpu": 0.0}
                if time.monotonic() - last_save >= save_every:
                    self.checkpoint(report)
                    last_save = time.monotonic()
            self.checkpoint(report)  # the end, or a signal: an exception saves nothing (a NaN must not)
        finally:
            for s, h in old.items():
                signal.signal(s, h)

    def checkpoint(self, report=None) -> None:
        if self.eval_set:
            self.last_eval = {"step": self.step, **evaluate(self.model, self.eval_set)}
            self.log({"step": self.step, "tokens": self.step * self.tcfg.tokens_per_step, "eval": self.last_eval})
            if report:
                report(self, {"eval": self.last_eval})
        self.save()


def _main_thread() -> bool:
    import threading
    return threading.current_thread() is threading.main_thread()


# ------------------------------------------------------------------------------------ CLI

def _fmt_time(s: float) -> str:
    s = int(s)
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


class Reporter:
    """A rich progress bar on a terminal; one plain line per log interval otherwise (nohup)."""

    def __init__(self, trainer: Trainer):
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, \
            TimeRemainingColumn

        self.console = Console(stderr=True)
        self.tty = self.console.is_terminal
        self.trainer = trainer
        self.step0, self.t0 = trainer.step, time.monotonic()  # the ETA uses the wall-clock rate of this run
        self.bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                            TextColumn("{task.fields[info]}"), TimeElapsedColumn(), TimeRemainingColumn(),
                            console=self.console, disable=not self.tty)
        self.task = self.bar.add_task("train", total=trainer.tcfg.total_steps, completed=trainer.step, info="")

    def __enter__(self):
        self.bar.__enter__()
        return self

    def __exit__(self, *exc):
        self.bar.__exit__(*exc)

    def __call__(self, trainer: Trainer, rec: dict) -> None:
        if "eval" in rec:
            ev = rec["eval"]
            parts = [f"{d}: loss {v['loss']:.3f} acc {v['acc']:.3f} mtp {'/'.join(f'{x:.3f}' for x in v['mtp_loss'])}"
                     f" agree {'/'.join(f'{x:.2f}' for x in v['mtp_agree'])}" for d, v in ev.items() if d != "step"]
            msg = f"eval @ step {ev['step']}: " + "; ".join(parts)
            (self.bar.console.log if self.tty else self._line)(msg)
            return
        mtp = "/".join(f"{x:.3f}" for x in rec["mtp"])
        info = (f"loss {rec['loss']:.3f} mtp {mtp} lr {rec['lr']:.2e} {rec['tok_s']:.0f} tok/s "
                f"({rec['cpu_tok_s']:.0f} per CPU s) "
                f"{rec['tokens'] / 1e6:.2f}M tok")
        if self.tty:
            self.bar.update(self.task, completed=trainer.step, info=info)
        else:
            rate = (trainer.step - self.step0) * trainer.tcfg.tokens_per_step / max(time.monotonic() - self.t0, 1e-9)
            left = (trainer.tcfg.total_steps - trainer.step) * trainer.tcfg.tokens_per_step / max(rate, 1e-9)
            self._line(f"step {trainer.step}/{trainer.tcfg.total_steps} {info} eta {_fmt_time(left)}")

    @staticmethod
    def _line(msg: str) -> None:
        print(time.strftime("%H:%M:%S"), msg, flush=True)


def main(argv: list[str] | None = None) -> int:
    dm, dt = TargetConfig(), TrainConfig()
    p = argparse.ArgumentParser(prog="python -m engine.train", description=__doc__.split("\n\n")[0])
    for f in fields(TargetConfig):
        if f.name != "rope_theta":
            p.add_argument(f"--{f.name.replace('_', '-')}", type=type(getattr(dm, f.name)), default=getattr(dm, f.name),
                           help="model shape" if f.name != "mtp" else "MTP modules (0: none)")
    for f in fields(TrainConfig):
        if f.name != "mix":
            p.add_argument(f"--{f.name.replace('_', '-')}", type=type(getattr(dt, f.name)), default=getattr(dt, f.name))
    p.add_argument("--mix", default=",".join(f"{k}={v}" for k, v in dt.mix.items()),
                   help="domain sampling weights, e.g. code=0.65,text=0.35")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    p.add_argument("--out", type=Path, default=FAMILY_DIR, help="where target.pt, mtp.pt and the log go")
    p.add_argument("--state-dir", type=Path, default=None, help="resume state (default: data/train)")
    p.add_argument("--resume", action="store_true", help="continue from the resume state (its configuration wins)")
    p.add_argument("--force", action="store_true", help="start over even if a checkpoint exists in --out")
    p.add_argument("--save-every", type=float, default=300.0, help="seconds between checkpoints")
    p.add_argument("--log-every", type=int, default=10, help="steps between log records")
    p.add_argument("--max-steps", type=int, default=None, help="stop after this many steps (this invocation)")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)

    from engine.corpus import data_dir, manifest_sha256
    from engine.tokenizer import load_tokenizer

    state_dir = args.state_dir if args.state_dir is not None else data_dir() / "train"
    tok = load_tokenizer()
    mix = {k: float(v) for k, v in (kv.split("=") for kv in args.mix.split(","))}
    mcfg = TargetConfig(**{f.name: getattr(args, f.name) for f in fields(TargetConfig) if f.name != "rope_theta"})
    tcfg = TrainConfig(**{f.name: getattr(args, f.name) for f in fields(TrainConfig) if f.name != "mix"}, mix=mix)
    state_path = state_dir / f"{mcfg.name}-resume.pt"
    if args.resume:
        if not state_path.exists():
            print(f"error: no resume state at {state_path}", file=sys.stderr)
            return 2
        st = torch.load(state_path, map_location="cpu", weights_only=False)
        mcfg, tcfg = _from_dict(TargetConfig, st["model"]), _from_dict(TrainConfig, st["train"])
        del st
    elif (args.out / "target.pt").exists() and not args.force:
        print(f"error: {args.out / 'target.pt'} exists; --resume to continue it, --force to start over",
              file=sys.stderr)
        return 2
    if mcfg.vocab != tok.vocab_size:
        print(f"error: --vocab {mcfg.vocab} but the tokenizer has {tok.vocab_size} ids", file=sys.stderr)
        return 2
    print(f"tokenizing the corpus (cached under {data_dir() / 'cache'}) ...", file=sys.stderr, flush=True)
    train, held = token_streams("train", tok), token_streams("heldout", tok)
    command = "python -m engine.train " + " ".join(shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv))
    meta = {"family": mcfg.name, "tokenizer_sha256": tok.sha256, "manifest_sha256": manifest_sha256(),
            "command": command, "threads": args.threads}
    trainer = Trainer(mcfg, tcfg, train, held, args.out, state_path, meta)
    if args.resume:
        trainer.resume()
    elif args.force:
        trainer.log_path.unlink(missing_ok=True)
    pm = trainer.params
    print(f"{mcfg.name}: {pm['main'] / 1e6:.2f}M parameters + {pm['mtp'] / 1e6:.2f}M in {mcfg.mtp} MTP module(s); "
          f"streams: " + ", ".join(f"{d} {len(s) / 1e6:.2f}M train tokens" for d, s in train.items()) +
          f"; {tcfg.total_steps} steps of {tcfg.tokens_per_step} tokens, from step {trainer.step}",
          file=sys.stderr, flush=True)
    with Reporter(trainer) as rep:
        trainer.run(max_steps=args.max_steps, save_every=args.save_every, log_every=args.log_every, report=rep)
    print(f"saved {args.out / 'target.pt'} at step {trainer.step}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
