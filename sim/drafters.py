"""What drafters cost: the forward passes each scheme's drafter runs, as model specs the roofline
cost model prices (DESIGN.md §3, §6).

- draft model: an independent small model, one pass per drafted depth.
- EAGLE head (Li et al. 2024): one decoder layer of the target's width over [features; embedding]
  (an fc of 2h x h), reusing the target's LM head; one pass per depth over the tree frontier.
- MTP module (DeepSeek-V3 §2.2): one transformer block of the target's own kind (MoE for
  DeepSeek-V3) after a 2h x h projection, sharing the embedding and LM head; D sequential modules.
- Medusa heads (Cai et al. 2024): K residual blocks (h x h + SiLU) each with its own LM head,
  all run in one pass on the last hidden state.
"""
from __future__ import annotations

from dataclasses import replace

from sim.cost import ACT_BYTES, Cost, ForwardCost, Work, compute_dtype
from sim.hardware import HardwareSpec
from sim.models import ModelSpec


def eagle_head(target: ModelSpec) -> ModelSpec:
    return replace(target, name=f"{target.name}-eagle-head", layers=1, experts=0, active_experts=0,
                   shared_experts=0, expert_ffn=0, dense_layers=0, mtp_modules=0)


def mtp_module(target: ModelSpec) -> ModelSpec:
    return replace(target, name=f"{target.name}-mtp-module", layers=1,
                   dense_layers=0 if target.experts else 1, mtp_modules=0)


def linear_cost(d_in: int, d_out: int, tokens, model: ModelSpec, hw: HardwareSpec, tp: int, count: int = 1) -> Cost:
    """`count` weight matrices of d_in x d_out applied to `tokens` tokens (weights read once)."""
    params = count * d_in * d_out
    f = 2.0 * params * tokens / tp
    b = params * model.bytes_per_weight / tp + tokens * count * (d_in + d_out) * ACT_BYTES / tp
    c, m = f / (hw.peak(compute_dtype(model)) * hw.eta_compute), b / (hw.mem_bw * hw.eta_memory)
    return Cost(time=max(c, m) + hw.launch_s, flops=f, bytes=b, compute_time=c, memory_time=m)


def add(*costs: Cost) -> Cost:
    return Cost(time=sum(c.time for c in costs), flops=sum(c.flops for c in costs),
                bytes=sum(c.bytes for c in costs), compute_time=sum(c.compute_time for c in costs),
                memory_time=sum(c.memory_time for c in costs))


class PassPricer:
    """Prices sequential drafter passes: pass j runs `tokens[j]` tokens for n sequences whose
    drafter context is Σctx + j·n (each pass appends one position per sequence)."""

    def __init__(self, spec: ModelSpec, hw: HardwareSpec, tp: int, fuse_input: bool = False):
        """fuse_input: an EAGLE/MTP drafter first projects [hidden; embedding] (2h) down to h."""
        self.fwd = ForwardCost(spec, hw, tp)
        self.spec, self.hw, self.tp, self.fuse = spec, hw, tp, fuse_input

    def __call__(self, n: int, ctx_sum: int, tokens_per_pass: list[int]) -> Cost:
        costs = []
        for j, tok in enumerate(tokens_per_pass):
            kv = ctx_sum + (j + 1) * n
            costs.append(self.fwd(Work(tokens=tok, seqs=n, pairs=kv * max(1, tok // max(n, 1)), kv_read=kv,
                                       lm_tokens=tok)))
            if self.fuse:
                h = self.spec.hidden
                costs.append(linear_cost(2 * h, h, tok, self.spec, self.hw, self.tp))
        return add(*costs)


def medusa_cost(target: ModelSpec, hw: HardwareSpec, tp: int, heads: int, n: int) -> Cost:
    """K heads in one pass over n last hidden states: each a residual h x h block + its own LM head."""
    h = target.hidden
    return add(linear_cost(h, h, n, target, hw, tp, count=heads), linear_cost(h, target.vocab, n, target, hw, tp, count=heads))
