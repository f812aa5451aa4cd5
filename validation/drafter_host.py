"""The drafters' host work around their forward passes, for the calibration (validation/calibrate.py).

A model drafter's step is its forward passes, which the cost model prices as it prices the
target's (sim.cost.ForwardCost: launches, elementwise passes, products, attention, and
pass_overhead_us a call), its input projection (sim.drafters.linear_cost), and host work around
them: laying out each pass's rows, picking and ranking the drafts, bookkeeping, the hand-off of
the target's features. The probes here run the engine's own drafters on random weights
(validation.host_probes._decode_steps), time every drafter forward call and input projection
inside each step's drafting (PassClock), and keep the rest: the host work alone, less a row's
picks over the LM head's vocabulary (priced in the pass), the first decode step (an admission's
catch-up on the prompt) left out. The first pass's probe runs on the calibration's context's own
shape after the trace's prompt where its weights fit the last-level cache (since 0.44.0), the
later passes' and the tree's on a 1-layer hidden-64 model amid the context's memory traffic.
Until 0.40.0 the calibration took whole drafting times (and a whole MTP step's growth per
sequence), whose growth per sequence includes the forwards' own, which the cost model prices
again, and no fixed part a pass beyond the bare call's: on the family at one sequence the
drafters' host work was priced 0.44-0.52 of the engine's, at sixteen 1.01-1.34
(validation/results/cpu-epyc-zen3/0.39.0/drafter_parts.txt).

The figures (drafter_host_figures), each a line through a probe's two batch sizes:
- a step's first pass (one MTP module drafting one token a step, 1 and 16 sequences): its fixed
  part `draft_first_us` and per sequence `draft_seq_us`;
- each later pass (the engine's EAGLE head drafting chains of 1 and 5): fixed `draft_pass_us`,
  per sequence `draft_pass_seq_us`;
- per further node a tree level expands (a static tree as deep as the 5-chain, at 16 sequences,
  beyond the chain): `draft_node_us`.
"""
from __future__ import annotations

import statistics
import time

from sim import trees as T

DRAFT_PASS_DEPTHS, DRAFT_PASS_SEQS = (1, 5), (1, 16)
# Medusa's probe: the engine's random drafters' heads (engine.drafting.heads.random_drafters), as a
# chain and as a static tree of MEDUSA_TREE nodes (Medusa's default size; the greedy tree for MEDUSA_PROBS, four ranks
# a head)
MEDUSA_HEADS, MEDUSA_TREE, MEDUSA_PROBS = 4, 63, [[0.6, 0.2, 0.1, 0.05]] * 4
# a static tree as deep as the deep chain, expanding 2, 3, 4 and 2 nodes at its levels 1-4
DRAFT_NODE_PROBS, DRAFT_NODE_NODES = [[0.7, 0.2]] * DRAFT_PASS_DEPTHS[1], 16
PROBE_TOKENS = 24  # tokens each probe sequence decodes


class PassClock:
    """Seconds of the drafters' forward calls and input projections, step by step: `wrap` times
    them on `clock` (after `sync`, on a GPU, so a call's kernels count in it) and closes a step at
    each target forward (a step's drafting precedes its target pass), so `steps[i]` belongs to
    the engine's i-th step."""

    def __init__(self, clock=time.perf_counter, sync=lambda: None):
        self.clock, self.sync, self.cur, self.steps = clock, sync, 0.0, []

    def _timed(self, fn):
        def call(*args, **kwargs):
            self.sync()
            t0 = self.clock()
            try:
                return fn(*args, **kwargs)
            finally:
                self.sync()
                self.cur += self.clock() - t0
        return call

    def wrap(self, model, drafters) -> None:
        """Time `drafters`' passes (engine.drafting.heads.Drafters) and Medusa's heads' call (its
        products, bias, SiLU and residual: what sim.drafters.medusa_cost prices besides the host
        work) and close a step at each of `model`'s (the target's) forwards."""
        inner = model.forward

        def forward(*args, **kwargs):
            self.steps.append(self.cur)
            self.cur = 0.0
            return inner(*args, **kwargs)
        model.forward = forward
        if drafters is None:
            return
        if drafters.medusa is not None:
            drafters.medusa.logits = self._timed(drafters.medusa.logits)
        for head in drafters.feature_heads():
            head.inputs = self._timed(head.inputs)
        for drafter in drafters.pass_models():
            drafter.forward = self._timed(drafter.forward)


def _host_time(seqs: int, entry: dict, device: str, traffic, checkpoint: dict | None, prompt: int) -> float:
    """Mean host work of a decode step's drafting for `seqs` sequences running `entry`: its
    draft_time less the drafter's passes and input projections (PassClock), the first decode step
    left out: its drafter catches up on the whole prompt, an admission's work (on the family's
    shape at 16 sequences after 128-token prompts 7 ms against 2.4-2.9 ms for the rest:
    validation/results/cpu-epyc-zen3/0.43.0/host_shape.txt)."""
    from validation.host_probes import TINY_CHECKPOINT, _decode_steps

    cols = _decode_steps(seqs, device, entry, PROBE_TOKENS, traffic, prompt, passes=True,
                         checkpoint=checkpoint or TINY_CHECKPOINT)
    return float(statistics.mean((cols["draft_time"] - cols["draft_pass_time"])[1:]))


def first_pass_probe(device: str, traffic=None, checkpoint: dict | None = None, prompt: int = 16) -> dict:
    """"dhost_mtp_b{seqs}": one MTP module drafting one token a step (every pass a first pass) for
    DRAFT_PASS_SEQS' sequences, amid `traffic` if given, on random weights of `checkpoint`'s
    shape (default the 1-layer hidden-64 probe model) after `prompt`-token prompts. The
    calibration runs it on its context's own shape where that fits the last-level cache: a
    first pass's host work per sequence grows with the model (the family's 97 us against the
    hidden-64 model's 66-73, 0.43.0's host_reprice.txt)."""
    return {f"dhost_mtp_b{b}": _host_time(b, {"scheme": "mtp", "depth": 1}, device, traffic, checkpoint, prompt)
            for b in DRAFT_PASS_SEQS}


def later_pass_probe(device: str, traffic=None, checkpoint: dict | None = None, prompt: int = 16) -> dict:
    """"dhost{depth}b{seqs}": the engine's EAGLE head drafting chains of DRAFT_PASS_DEPTHS for
    DRAFT_PASS_SEQS' sequences; "dhost_node": the static tree of DRAFT_NODE_NODES nodes for
    DRAFT_NODE_PROBS, as deep as the deep chain, for the most sequences. Random drafts are
    rejected, so every step drafts the whole chain or tree. Amid `traffic`, shape and prompt as
    first_pass_probe; the calibration keeps these on the hidden-64 model (on the family's own
    shape a tree level's further node read 8 us against 12-25, and the trees priced worse in
    the same engine runs: 0.43.0's host_reprice.txt)."""
    out = {f"dhost{d}b{b}": _host_time(b, {"scheme": "eagle", "depth": d}, device, traffic, checkpoint, prompt)
           for d in DRAFT_PASS_DEPTHS for b in DRAFT_PASS_SEQS}
    tree = {"scheme": "eagle", "depth": DRAFT_PASS_DEPTHS[1], "tree": DRAFT_NODE_NODES,
            "acceptance": {"rank_depth": DRAFT_NODE_PROBS}}
    out["dhost_node"] = _host_time(DRAFT_PASS_SEQS[1], tree, device, traffic, checkpoint, prompt)
    return out


def medusa_probe(device: str, traffic=None, checkpoint: dict | None = None, prompt: int = 16) -> dict:
    """"dhost_medusa_b{seqs}": Medusa's MEDUSA_HEADS heads drafting a chain for DRAFT_PASS_SEQS'
    sequences; "dhost_medusa_tree": its MEDUSA_TREE-node static tree for the most. Its host work
    (the last features gathered, the top-k over every head's logits, the tree's tokens and
    candidates laid out a node at a time) is not an MTP pass's: priced with the first pass's
    figures, Medusa's drafting read 1.09-1.16 of the engine's in 0.44.0's ordinary steps. Shape,
    prompt and traffic as first_pass_probe; random drafts are rejected, so every step drafts."""
    chain = {"scheme": "medusa", "heads": MEDUSA_HEADS, "lm_head": "shared", "tree": "chain"}
    out = {f"dhost_medusa_b{b}": _host_time(b, chain, device, traffic, checkpoint, prompt) for b in DRAFT_PASS_SEQS}
    tree = {**chain, "tree": MEDUSA_TREE, "acceptance": {"rank_depth": MEDUSA_PROBS}}
    out["dhost_medusa_tree"] = _host_time(DRAFT_PASS_SEQS[1], tree, device, traffic, checkpoint, prompt)
    return out


def medusa_host_figures(t: dict, row_s: float = 0.0) -> dict:
    """Medusa's host fields (seconds, never negative) from medusa_probe's times `t`: a line
    through the chain's two batch sizes gives the fixed part (medusa_first_s) and the part per
    sequence (medusa_seq_s, less its heads' rows' picks, `row_s` each, which the cost model
    prices); the tree's beyond the chain's, per sequence and further node, medusa_node_s."""
    b0, b1 = DRAFT_PASS_SEQS
    per_seq = (t[f"dhost_medusa_b{b1}"] - t[f"dhost_medusa_b{b0}"]) / (b1 - b0)
    node = (t["dhost_medusa_tree"] - t[f"dhost_medusa_b{b1}"]) / (b1 * (MEDUSA_TREE - MEDUSA_HEADS))
    return {"medusa_first_s": max(0.0, t[f"dhost_medusa_b{b0}"] - b0 * max(0.0, per_seq)),
            "medusa_seq_s": max(0.0, per_seq - MEDUSA_HEADS * row_s),
            "medusa_node_s": max(0.0, node)}


def drafter_host_probe(device: str, traffic=None, checkpoint: dict | None = None, prompt: int = 16) -> dict:
    """first_pass_probe and later_pass_probe on one model: every time drafter_host_figures reads."""
    return first_pass_probe(device, traffic, checkpoint, prompt) | later_pass_probe(device, traffic, checkpoint, prompt)


def draft_node_rows() -> int:
    """Rows of the probe's static tree's later passes beyond one per sequence a pass, per
    sequence: the nodes each level expands, less one (its levels 1-4 expand 2, 3, 4, 2: 7)."""
    depth = DRAFT_PASS_DEPTHS[1]
    levels = T.expanding(T.greedy_static_tree(DRAFT_NODE_PROBS, DRAFT_NODE_NODES, depth), depth)
    assert all(levels), "the probe's tree must expand a node at every level, as the chain does"
    return sum(e - 1 for e in levels)


def drafter_host_figures(t: dict, first_row_s: float = 0.0, later_row_s: float = 0.0) -> dict:
    """The profile's drafter host fields (seconds, never negative) from the probes' times `t`: a
    line through each probe's two batch sizes gives a pass's fixed part and its part per
    sequence; the deep chain's beyond the one-pass chain's, per extra pass, a later pass's; the
    tree's beyond the deep chain's, per further node, draft_node_s. Each per-row figure less the
    pick and ranking over one LM-head row of its probe's vocabulary (`first_row_s` for the first
    pass's probe, `later_row_s` for the chains' and tree's), which the cost model prices in the
    drafter's pass (draft_logit_ns a logit element)."""
    (d0, d1), (b0, b1) = DRAFT_PASS_DEPTHS, DRAFT_PASS_SEQS
    first_seq = (t[f"dhost_mtp_b{b1}"] - t[f"dhost_mtp_b{b0}"]) / (b1 - b0)
    grow = (t[f"dhost{d1}b{b1}"] - t[f"dhost{d1}b{b0}"]) - (t[f"dhost{d0}b{b1}"] - t[f"dhost{d0}b{b0}"])
    later_seq = grow / (b1 - b0) / (d1 - d0)
    node = (t["dhost_node"] - t[f"dhost{d1}b{b1}"]) / (b1 * draft_node_rows())
    return {"draft_first_s": max(0.0, t[f"dhost_mtp_b{b0}"] - b0 * max(0.0, first_seq)),
            "draft_seq_s": max(0.0, first_seq - first_row_s),
            "draft_pass_s": max(0.0, (t[f"dhost{d1}b{b0}"] - t[f"dhost{d0}b{b0}"]) / (d1 - d0) - b0 * max(0.0, later_seq)),
            "draft_pass_seq_s": max(0.0, later_seq - later_row_s),
            "draft_node_s": max(0.0, node - later_row_s)}
