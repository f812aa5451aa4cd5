"""The memory traffic that the engine's host work runs amid, for the calibration's host-time probes.

In the engine, the host's own work (scheduling, packing a step, verification, a drafter's
bookkeeping, each operation's dispatch) runs between forward passes that stream the model's
weights through the caches, so the interpreter's code and data come back from memory each
step. The host-time probes run tiny models (hidden 64), whose steps leave all of that in the L2
cache. Measured on a 2-core AMD EPYC VM with a 32 MB last-level cache (2026-12-02), the same
engine decode step:
- its time beyond the forward, on the probe model at batch 1, after a read of 0 / 1 / 4 / 16 /
  64 MiB following each forward: 0.22 / 0.24 / 0.25 / 0.34 / 0.64 ms (at batch 16: 0.50 / 0.51 /
  0.59 / 0.63 / 0.98 ms);
- beyond the forward of the trained family itself (17 MB of weights), 0.29 ms at batch 1 and
  0.45 ms at batch 4, against 0.19 and 0.26 ms on the probe model, same prompts;
- priced from the probes as they were, every scheme of the family's comparison read its
  drafting, its step beyond drafting and its prefill alike 8-25% short.

`Traffic` reads a buffer after every forward pass of the models it wraps (the target's weight
bytes after a target pass, a drafter pass's after a drafter's) and keeps a clock that leaves the
reads' own time out, which the engine's runner and a probe's timing take in place of
time.perf_counter; `read` before a probe call that is not a pass does the same for the host
work that follows a pass (verification, packing). A GPU's passes stream device memory, not the
host's caches: no traffic there.
"""
from __future__ import annotations

import time
from dataclasses import replace

import torch

from sim.models import ModelSpec


def pass_bytes(model: ModelSpec) -> tuple[int, int]:
    """(bytes a target pass reads, bytes a drafter pass reads) for `model`: its weights, and one
    layer of its shape with its LM head (an EAGLE head or MTP module reading the target's)."""
    return int(model.weight_bytes), int(replace(model, layers=1, mtp_modules=0).weight_bytes)


class Traffic:
    """A read of `target_bytes` after every target pass and `drafter_bytes` after every drafter
    pass of the models `wrap` is given, off the `clock`."""

    def __init__(self, target_bytes: int, drafter_bytes: int, device: str = "cpu"):
        self.target_bytes, self.drafter_bytes = int(target_bytes), int(drafter_bytes)
        n = max(1, max(self.target_bytes, self.drafter_bytes) // 4)
        self.buf = torch.ones(n, device=device)  # (n,) fp32: read in full, or its first part
        self.swept = 0.0  # seconds spent reading, left off the clock

    @staticmethod
    def of(model: ModelSpec | None, device: str = "cpu") -> "Traffic | None":
        """The traffic of `model`'s passes on a CPU; None without a model or on a GPU."""
        if model is None or device != "cpu":
            return None
        return Traffic(*pass_bytes(model), device)

    def read(self, nbytes: int | None = None) -> None:
        """Read `nbytes` (default: a target pass's) of the buffer, off the clock."""
        n = (self.target_bytes if nbytes is None else nbytes) // 4
        if n <= 0:
            return
        t0 = time.perf_counter()
        self.buf[:n].sum()
        self.swept += time.perf_counter() - t0

    def after_pass(self, drafter: bool = False):
        """The read that follows a target pass (a drafter pass's with `drafter`), as a call."""
        nbytes = self.drafter_bytes if drafter else self.target_bytes
        return lambda: self.read(nbytes)

    def clock(self) -> float:
        """time.perf_counter less the reads so far: a duration on it is the probe's work alone."""
        return time.perf_counter() - self.swept

    def wrap(self, model, drafter: bool = False):
        """Make `model`'s forward (an engine Model) read a pass's bytes after each call; returns it."""
        inner, read = model.forward, self.after_pass(drafter)

        def forward(*args, **kwargs):
            out = inner(*args, **kwargs)
            read()
            return out
        model.forward = forward
        return model

    def wrap_drafters(self, drafters):
        """Every drafter model of an engine.drafting.heads.Drafters (Medusa's heads are no pass)."""
        if drafters is None:
            return drafters
        for model in drafters.pass_models():
            self.wrap(model, drafter=True)
        return drafters
