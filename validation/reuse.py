"""The calibration's probe of the products an engine's step takes, timed in the engine itself
(validation/calibrate.py; since 0.42.0).

The warm matmul curves (gemm_shapes_warm) time a pass over a model's matrices that wait
WARM_GAP_S of host work between passes, in a pool of one shape. The engine's products run
slower or faster than that, by where in a step they run:
- `gemm_step`: the target's products in a step of plain decoding;
- `gemm_reuse`: a drafter's products of weights used again within the step: an EAGLE head's
  and MTP module's first pass's LM head (the target's, used right after the target's forward),
  and every later pass's layer products and LM head (used a pass before);
- `draft_input_s`, `draft_input_row_s` (since 0.43.0): an EAGLE head's or MTP module's fused
  input beyond its 2h -> h product (engine.drafting.heads.FeatureHead.inputs: the embedding
  gather, two norms, the concatenation, the call), its later passes' call less the product
  within it, a line through the rows (input_line). On the family's shape after 128-token
  prompts it read 98-126 us a call and 2.0-2.3 us a row, where the cost model had charged a
  launch (71 us); timed in a hot loop the same call reads 72 us and 0.6 us.

`insitu_probe` runs the engine on random weights of the context model's shape (the family the
CPU traces run), `r` sequences at once for each of REUSE_ROWS, once without speculation and
once with an EAGLE chain of INSITU_DEPTH (random drafts, all rejected: every step drafts the
whole chain, one row a sequence a pass), and times each matrix product where it runs
(ProductClock). `insitu_figures`
divides each part's median time a step by the warm curves' price of the same products at the
same rows. Since 0.53.0 the plain decoding runs also time the target's later layers whole, and
`layer_in_place` takes off such a layer the cost model's price of all but its host time
(`layer_price`): at one sequence the profile's host time a layer (`launch_us`). On the Zen 4 VM
the engine's layer had cost 1.20x the family-shaped layer probe's, paired round by round
(validation/results/cpu-epyc-zen4/0.52.0/engine_layer.txt), and the comparisons there priced
every scheme's steps 7-17% short.

Since 0.54.0 every run also times the target's later layers' attention calls, and at two
sequences or more a second EAGLE run verifies chains of 1 (an MTP module's 2 query tokens a
sequence) beside the chains of INSITU_DEPTH (6): `verify_seq_table` takes each chain's call less
its price (`attention_price`), less plain decoding's call less its price, a sequence's share,
by query rows and sequences (hardware.verify_seqs). On the Zen 4 VM at 32 sequences a chain's
call had read 1.31-1.46x its price in the family's engine, 15-25 us a sequence a layer beyond
decoding's (validation/results/cpu-epyc-zen4/0.53.0-c32/verify_products.txt). Most of that
turned out to be the reference's padding (its group call takes every sequence up to the longest,
and the family's chains of different acceptance drift apart: priced since 0.54.0 as
sim.cost.Work.group_pad, cpu-epyc-zen4/0.54.0/padding.txt); this probe's sequences all run
alike (every draft rejected), so it reads what is left, 0-16 us a sequence.

Since 0.56.0 the probe also joins the engine's step log to the target forwards it times
(`timed_steps`): a step's rest is its clock less its drafting and its target forward, and
`spec_rest_figures` takes the EAGLE run's chain steps' rest beyond the plain run's, beyond what
the profile already charges for the difference, by sequences (hardware.spec_step_s,
spec_seq_s). In the family's engine a chain step spent about 0.11 ms more than a decode step at
one sequence, in the verification call, the drafts and results as tensors and lists, scheduling
the speculative slots and packing, where the profile had charged about 17 us
(validation/results/cpu-epyc-zen4/0.56.0/rest_parts-c1.txt). Each rows value is a probe of its
own in the calibration, and the cheap ones are called several times a round (REUSE_CALLS).

Until 0.41.0 this probe replayed a step's order of products with random matrices and fixed host
work between them. On a 2-core EPYC VM (32 MB L3) the engine's drafters ran the reused products
1.2-1.3x slower than the replay read them (validation/results/cpu-epyc-zen3/0.41.0/
drafter_parts.txt), and host work or memory reads in the replay's gaps did not close that
(pass_gaps.txt). The engine timed in place after the family's 128-token prompts read them
1.15-1.53x the replay in the same process (0.42.0/insitu.txt); the prompt matters, the KV a step
reads between the products (0.42.0/family_check.txt: 15-21% slower at 16 sequences after 128
tokens than after 16), so the probe runs after the trace's median prompt (probe_prompt). With
these figures the family's drafters' products are priced 0.94-1.11x the engine's at 4 and 16
sequences, where the replay's read 0.75-0.88x (0.42.0/drafter_parts.txt).

In 0.42.0 the probe also timed the target's products in the EAGLE run's verifying steps
(`gemm_verify`, the factor of a model drafter's target). It read 1.06-1.17 at 6 and 24 rows and
1.00-1.03 at 96 and 384, and priced the family's large tree verifications short: its comparisons
repriced without it read as well or better (largest error 5.9 / 7.5 / 6.8% against 6.7 / 10.6 /
7.7% at concurrency 1 / 4 / 16: 0.42.0/repriced-without-verify*.txt). Since 0.43.0 every
target forward takes gemm_step's factor.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from sim.cost import REUSE_PARTS, STEP_PARTS, weight_shapes
from sim.models import ModelSpec

REUSE_ROWS = (1, 4, 16, 64)  # sequences at once: a drafter pass's rows, up to a tree level's
REUSE_STEPS = 20  # whole steps timed a call, at each rows, after REUSE_SKIP untimed ones
# calls a calibration round of each rows value (validation.calibrate spreads them through its
# cycle): on the Zen 4 VM the drafters' reused products at 1 and 4 rows swing most from call to
# call (a later pass's LM head at 1 row: 152-390 us a step, cv 0.23 over 30 calls, 2.6 s apart;
# at 4: cv 0.15; at 16 the parts' cv 0.03-0.07) and cost least (0.8 and 1.4 s a call against
# 2.8 and 9.2 at 16 and 64), so those get more (cpu-epyc-zen4/0.56.0/reuse_spread*.txt)
REUSE_CALLS = {1: 6, 4: 4}
REUSE_SKIP = 3
REUSE_PROMPT = 16  # prompt tokens a sequence, where no trace gives its own (probe_prompt)
REUSE_PROMPT_MAX = 1024  # at most (64 sequences' prefill in one step)
INSITU_DEPTH = 5  # the EAGLE chain the probe drafts (EAGLE's depth 5): its passes a step
# the query rows a sequence of the chains whose attention the probe prices in place (verify_seqs):
# a chain of 1 (an MTP module's) and of INSITU_DEPTH, drafted by EAGLE runs at two sequences or more
VERIFY_ROWS = (2, INSITU_DEPTH + 1)


def layer_shapes(m: ModelSpec) -> list[tuple[int, int]]:
    """(k, n) of one dense layer's matrices in the order a forward multiplies by them."""
    attn, ffn, _ = weight_shapes(m, 1)
    return [(int(k), int(n)) for k, n in attn + ffn]


class ProductClock:
    """Times, step by step, the matrix products (`@`) of an engine run's target and (if given)
    its EAGLE head by the weight each reads, while it is entered (`with clock:`): `@` on tensors
    (torch.Tensor.__matmul__) is wrapped until it exits, and the target's and head's forwards
    (on the instances) say whose pass runs. `steps[i]`: {"target": {"layer" | "lm": [(rows,
    seconds), ...]}, "passes": [the same, a drafter pass each]}; a drafter pass's entry also
    holds its fused input's call ("input", timed whole: FeatureHead.inputs) and the 2h -> h
    product within it ("input_product"). A step's drafting precedes its target pass, which
    closes it. With two target layers or more, `steps[i]["layer"]` is a later layer's seconds,
    whole (from the second layer's first product to the LM head's, over the later layers; the
    wrapper's own few microseconds a product in it), `steps[i]["attention"]` a later layer's
    attention call (the target's model.ops_unchecked.paged_attention, wrapped; their mean), and
    `steps[i]["keys"]` the keys its sequences attend to (the sum of the step's kv_lens), and
    `steps[i]["forward"]` the target's forward's seconds, whole (`timed_steps` adds the engine's
    own step log: "duration", "draft", "ops"). (A torch function mode, which sees every torch call, made the
    probe's steps 1.6-1.75x as long as the engine's own on the family's shape, this wrapper
    1.01-1.05x: validation/results/cpu-epyc-zen3/0.42.0/mode_check.txt.)"""

    def __init__(self, model, head=None, clock=time.perf_counter):
        self.clock, self.steps, self.cur, self.where = clock, [], None, None
        models = [model] + ([head.model] if head is not None else [])
        self.kinds = {w.data_ptr(): "layer" for m in models for layer in m.layers
                      for w in (layer.wqkv, layer.wo, layer.w_gate_up, layer.w_down)}
        self.kinds[model.lm_head.data_ptr()] = "lm"
        # the target's later layers, whole, in place: from its second layer's first product to its
        # LM head's (marks; the first layer runs the index checks, the later ones not)
        self.later = len(model.layers) - 1
        self.marks = {model.layers[1].wqkv.data_ptr(): "later", model.lm_head.data_ptr(): "head"} if self.later else {}
        self._inner, self._input = None, None
        if self.later:  # the later layers' attention calls (model.ops_unchecked), in the target's forwards
            model.ops_unchecked = replace(model.ops_unchecked,  # a frozen dataclass
                                          paged_attention=self._wrap_attention(model.ops_unchecked.paged_attention))
        model.forward = self._wrap(model.forward, True)
        if head is not None:
            self.kinds[head.proj.data_ptr()] = "input_product"
            head.model.forward = self._wrap(head.model.forward, False)
            head.inputs = self._wrap_input(head.inputs)

    def _wrap_input(self, fn):
        """The fused input's call, timed whole, its product within it; kept for the pass it feeds."""
        def inputs(*args, **kwargs):
            self.where = self._input = {}
            t0 = self.clock()
            try:
                return fn(*args, **kwargs)
            finally:
                self._input["input"] = [(int(args[0].shape[0]), self.clock() - t0)]
                self.where = None
        return inputs

    def _wrap_attention(self, fn):
        """A later layer's attention call, timed into its step's target pass."""
        def call(*args, **kwargs):
            target = self.cur.get("target") if self.cur is not None else None
            if target is None or self.where is not target:
                return fn(*args, **kwargs)
            t0 = self.clock()
            try:
                return fn(*args, **kwargs)
            finally:
                self.cur["attention"] = self.cur.get("attention", 0.0) + self.clock() - t0
        return call

    def __enter__(self):
        inner = self._inner = torch.Tensor.__matmul__

        def matmul(a, b):
            if self.where is None:
                return inner(a, b)
            t0 = self.clock()
            out = inner(a, b)
            dt = self.clock() - t0
            ptr = b.data_ptr()  # x @ W.T: W.T shares W's storage
            mark = self.marks.get(ptr)
            if mark is not None and self.cur is not None and self.where is self.cur.get("target"):
                self.cur.setdefault("marks", {})[mark] = t0
            kind = self.kinds.get(ptr)
            if kind is not None:
                self.where.setdefault(kind, []).append((int(a.shape[0]), dt))
            return out
        torch.Tensor.__matmul__ = matmul
        return self

    def __exit__(self, *exc):
        torch.Tensor.__matmul__ = self._inner
        return False

    def _wrap(self, fn, target: bool):
        def forward(*args, **kwargs):
            if self.cur is None:
                self.cur = {"passes": []}
            if target:
                self.cur["target"] = self.where = {}
                self.cur["keys"] = int(args[0].kv_lens.sum())  # the step's keys, all its sequences'
                t0 = self.clock()
            else:
                self.where = self._input or {}
                self._input = None
                self.cur["passes"].append(self.where)
            try:
                return fn(*args, **kwargs)
            finally:
                self.where = None
                if target:
                    self.cur["forward"] = self.clock() - t0  # the target's forward, whole
                    marks = self.cur.pop("marks", {})
                    if len(marks) == 2:  # a later layer's seconds, whole (their mean)
                        self.cur["layer"] = (marks["head"] - marks["later"]) / self.later
                    if "attention" in self.cur:  # a later layer's attention call (their mean)
                        self.cur["attention"] /= self.later
                    self.steps.append(self.cur)
                    self.cur = None
        return forward


def _total(part: dict, kind: str) -> float:
    return sum(s for _, s in part.get(kind, []))


def _rows_are(part: dict, rows: int) -> bool:
    """Whether every product of `part` (a pass's or the target's) ran `rows` rows."""
    return bool(part.get("lm")) and all(n == rows for v in part.values() for n, _ in v)


def step_parts(steps: list, r: int, passes: int, skip: int = REUSE_SKIP) -> dict:
    """Each part's times a step ({part: [seconds, ...]}) over ProductClock's `steps` of `r`
    sequences that are whole: `passes` drafter passes, the first's LM head at r rows (its layers
    catch up on the tokens the last step accepted) and the later ones' products all at r, and a
    target pass of (passes + 1) r rows (no prefill in them); the first `skip` of them left out.
    Parts: without passes STEP_PARTS, "layers" and "lm" (the target's layers' products, all of
    them, and its LM head's), and where timed "inplace", "keys" and "attention" (a later layer
    whole, the step's keys, a later layer's attention call); with passes REUSE_PARTS (but for
    one pass, "first" only) and, where the passes' fused inputs were timed, "input_rest" (the
    later passes' per pass; the fused input's call beyond its product), and where timed
    "verify_attention" and "verify_keys" (a later layer's attention call, the step's keys); where
    the engine's step log was attached (timed_steps), "rest" and "ops" (plain decoding) or
    "chain_rest" and "chain_ops" (with passes): the step's clock less its drafting and the
    target's forward, and its allocator operations."""
    got: dict = {}
    whole = [s for s in steps if len(s["passes"]) == passes and _rows_are(s.get("target", {}), (passes + 1) * r)
             and (not passes or _rows_are({"lm": s["passes"][0].get("lm", [])}, r))
             and all(_rows_are(p, r) for p in s["passes"][1:])][skip:]
    for s in whole:
        t, ps = s["target"], s["passes"]
        if passes:
            later = ps[1:]
            parts = {"first": _total(ps[0], "lm")}
            if later:
                parts |= {"later_layer": statistics.mean(_total(p, "layer") for p in later),
                          "later_lm": statistics.mean(_total(p, "lm") for p in later)}
            if later and all("input" in p for p in later):
                parts["input_rest"] = statistics.mean(_total(p, "input") - _total(p, "input_product") for p in later)
            if "attention" in s:  # a later layer's attention call verifying, and the keys its step attends to
                parts |= {"verify_attention": s["attention"], "verify_keys": s["keys"]}
            if "duration" in s:  # the step's rest (its clock less drafting and the target's forward), its allocator ops
                parts |= {"chain_rest": s["duration"] - s["draft"] - s["forward"], "chain_ops": s["ops"]}
        else:
            parts = {"layers": _total(t, "layer"), "lm": _total(t, "lm")}
            if "layer" in s:  # a later layer in place, whole, and the keys its step attends to
                parts |= {"inplace": s["layer"], "keys": s["keys"]}
            if "attention" in s:  # and its attention call
                parts["attention"] = s["attention"]
            if "duration" in s:  # and the step's rest, its allocator ops
                parts |= {"rest": s["duration"] - s["draft"] - s["forward"], "ops": s["ops"]}
        for k, v in parts.items():
            got.setdefault(k, []).append(v)
    return got


def timed_steps(steps: list, cols: dict) -> list:
    """ProductClock's `steps` with the engine's own step log (`cols`: StepLog.columns()) added to
    each: "duration" and "draft" (the step's clock and its drafting, seconds) and "ops" (its
    allocator operations). The clock's first step is the engine's untimed warm-up forward
    (EngineRun._warm_up), which the log does not hold; any other mismatch is an error."""
    n = len(cols["duration"])
    if len(steps) != n + 1:
        raise RuntimeError(f"the in-situ probe timed {len(steps)} target forwards for {n} engine steps and a warm-up")
    for s, i in zip(steps[1:], range(n)):
        s |= {"duration": float(cols["duration"][i]), "draft": float(cols["draft_time"][i]),
              "ops": int(cols["page_allocs"][i]) + int(cols["page_frees"][i])}
    return steps[1:]


def probe_prompt(trace) -> int:
    """The prompt tokens the probe gives each sequence to price `trace`: enough that its timed
    steps (REUSE_SKIP untimed, then REUSE_STEPS) sit at the median context of `trace`'s decode
    steps, its requests' median of prompt + half the output (at most REUSE_PROMPT_MAX).
    The KV a step reads between the products slows them: at 16 sequences the later passes'
    products read 15-21% slower after 128-token prompts than after 16-token ones
    (validation/results/cpu-epyc-zen3/0.42.0/family_check.txt). Until 0.56.1 the prompt was the
    requests' median prompt, and the family's own runs (128-token prompts, 64 out) read their
    products 1.04-1.08x the probe's, paired round by round; the probe after 160-token prompts
    1.05-1.08x (validation/results/cpu-epyc-zen4/0.56.1/insitu_vs_run*.txt)."""
    from sim.workload import make_requests
    median = statistics.median(r.prompt_tokens + r.output_tokens // 2
                               for r in make_requests(trace.workload, trace.seed).requests)
    return max(1, min(REUSE_PROMPT_MAX, int(median) - REUSE_SKIP - REUSE_STEPS // 2))


def insitu_probe(model: ModelSpec, device: str, rows=REUSE_ROWS, steps: int = REUSE_STEPS, prompt: int = REUSE_PROMPT):
    """The probe's call: for each of `rows`, the engine on random weights of `model`'s shape,
    `prompt`-token prompts, without speculation and with an EAGLE chain of INSITU_DEPTH (see the
    module's docstring), and at two sequences or more with an EAGLE chain of each other
    VERIFY_ROWS' depth (1),
    {f"reuse{part}{r}": median seconds a step} for STEP_PARTS (plain decoding), REUSE_PARTS,
    "input_rest" (the EAGLE run's fused input beyond its product), and "inplace", "keys" and
    "attention" (plain decoding's later layer, whole, its steps' keys, and its attention call:
    layer_in_place; step_parts); and {f"verify{q}attention{r}", f"verify{q}keys{r}"}: a later
    layer's attention call and the steps' keys of the chain of q query tokens a sequence
    (verify_seq_table)."""
    from engine.runner import run_scheme
    from validation.host_probes import checkpoint_of, probe_engine
    tokens = REUSE_SKIP + steps + INSITU_DEPTH + 2  # the last steps draft shorter chains

    def run(r: int, passes: int) -> dict:
        entry = {"scheme": "eagle", "depth": passes} if passes else {"scheme": "none"}
        trace, target, drafters, requests = probe_engine(r, device, entry, tokens, prompt, checkpoint_of(model))
        clock = ProductClock(target, drafters.eagle if passes else None)
        with clock:
            res = run_scheme(trace, trace.speculation[0], requests, target, drafters=drafters)
        got = step_parts(timed_steps(clock.steps, res.result.steps.columns()), r, passes)
        if not got:
            raise RuntimeError(f"the in-situ probe's {entry['scheme']} run at {r} sequences had no whole step")
        med = {p: statistics.median(v) for p, v in got.items()}
        out = {f"verify{passes + 1}{name}{r}": med.pop(p)
               for p, name in (("verify_attention", "attention"), ("verify_keys", "keys")) if p in med}
        return out | ({f"reuse{p}{r}": v for p, v in med.items()} if passes in (0, INSITU_DEPTH) else {})

    def call():
        out = {}
        for r in rows:
            out |= run(r, 0)
            for depth in (q - 1 for q in VERIFY_ROWS if r > 1 or q - 1 == INSITU_DEPTH):
                out |= run(r, depth)
        return out
    return call


def insitu_figures(t: dict, model: ModelSpec, shapes_warm: dict, peak: float, rows=REUSE_ROWS) -> dict:
    """{"gemm_reuse", "gemm_step": rows of the profile} from insitu_probe's times `t` and the
    profile's warm shape curves (`shapes_warm`: {"KxN": [[rows, fraction of `peak`], ...]}):
    each part over the warm curves' price of its products at its rows (a drafter pass's, or a
    decoding target's, r). A rows value without the curves it needs is left out. With the fused
    input's rest at two rows values or more, also "draft_input_s" and "draft_input_row_s"
    (input_line)."""
    layer, h = layer_shapes(model), model.hidden

    def warm(shapes, r):
        total = 0.0
        for k, n in shapes:
            curve = shapes_warm.get(f"{k}x{n}")
            if not curve:
                return None
            at, frac = np.array(curve, dtype=float).T
            total += 2.0 * k * n * r / (float(np.interp(r, at, frac)) * peak)
        return total

    def row(r, keys, prices):
        if any(p is None for p in prices) or any(f"reuse{k}{r}" not in t for k in keys):
            return None
        return [r] + [round(t[f"reuse{k}{r}"] / p, 4) for k, p in zip(keys, prices)]

    t = t | rising_parts(t, REUSE_PARTS + STEP_PARTS, rows)
    out = {"gemm_reuse": [], "gemm_step": []}
    for r in rows:
        lm, lay = warm([(h, model.vocab)], r), warm(layer, r)
        for name, keys, prices in (("gemm_reuse", REUSE_PARTS, (lm, lay, lm)),
                                   ("gemm_step", STEP_PARTS, (lay and lay * model.layers, lm))):
            got = row(r, keys, prices)
            if got is not None:
                out[name].append(got)
    rest = [(r, t[f"reuseinput_rest{r}"]) for r in rows if f"reuseinput_rest{r}" in t]
    if len(rest) >= 2:
        out["draft_input_s"], out["draft_input_row_s"] = input_line(rest)
    return out


def rising_parts(t: dict, parts, rows) -> dict:
    """{f"reuse{part}{r}": seconds} for each part of `parts` timed at two rows values of `rows` or
    more: its times made nondecreasing in rows (rising), since the same weights' products at more
    rows cannot take less time. A slow spell of the host at one rows value otherwise gives a
    profile where four sequences decode faster than one: on CI's host (stop 64) a calibration
    priced a later layer at 4 sequences 0.87x its price at 1 (its profile not kept: the likely
    cause)."""
    out = {}
    for part in parts:
        at = [r for r in rows if f"reuse{part}{r}" in t]
        if len(at) >= 2:
            out |= dict(zip((f"reuse{part}{r}" for r in at), rising([t[f"reuse{part}{r}"] for r in at])))
    return out


def rising(values: list[float]) -> list[float]:
    """The nondecreasing sequence nearest `values` in least squares (pool adjacent violators:
    each run that falls is replaced by its mean)."""
    blocks: list[list[float]] = []  # [mean, count]
    for v in values:
        blocks.append([float(v), 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            (m1, n1), (m2, n2) = blocks.pop(-2), blocks.pop()
            blocks.append([(m1 * n1 + m2 * n2) / (n1 + n2), n1 + n2])
    return [m for m, n in blocks for _ in range(int(n))]


def input_line(rest: list[tuple[int, float]]) -> tuple[float, float]:
    """(seconds a call, seconds a row), neither negative: the least-squares line through the fused
    input's rest (its call beyond its product) at each rows value, [(rows, seconds), ...]."""
    r, s = np.array(rest, dtype=float).T
    slope = max(0.0, float(np.polyfit(r, s, 1)[0]))
    return max(0.0, float(np.mean(s - slope * r))), slope


def spec_rest_figures(t: dict, figures: dict, model: ModelSpec, rows=REUSE_ROWS) -> dict:
    """{"spec_rows": [[rows, seconds], ...], "spec_step_s", "spec_seq_s"} from insitu_probe's
    times `t`: at each rows value, the EAGLE run's steps' rest (a chain of INSITU_DEPTH drafts a
    sequence) less the plain decoding run's, less what the profile of calibration figures
    `figures` already charges for the difference (the chains' extra logit rows at logit_s, their
    drafted nodes packed at pack_node_s, their extra allocator operations at alloc_op_s); and
    with two rows values or more, the least-squares line through those (input_line: neither
    part negative), a step's and a drafted sequence's. Empty where the probe timed no rest.
    On the Zen 4 VM the family's chain steps spent about 0.11 ms more than its decode steps at
    one sequence and 0.19 ms at four beyond the forward and drafting, where the profile charged
    about 17 us (cpu-epyc-zen4/0.56.0/rest_parts-c1.txt, split-ngram-c1.txt)."""
    out = []
    for r in rows:
        keys = [f"reusechain_rest{r}", f"reuserest{r}", f"reusechain_ops{r}", f"reuseops{r}"]
        if all(k in t for k in keys):
            chain, plain, chain_ops, plain_ops = (t[k] for k in keys)
            nodes = r * INSITU_DEPTH  # drafted nodes: as many extra logit rows
            priced = (figures["logit_s"] * model.vocab * nodes + figures["pack_node_s"] * nodes
                      + figures["alloc_op_s"] * (chain_ops - plain_ops))
            out.append([r, chain - plain - priced])
    got = {"spec_rows": out} if out else {}
    if len(out) >= 2:
        got["spec_step_s"], got["spec_seq_s"] = input_line(out)
    return got


def _one_layer(figures: dict, model: ModelSpec):
    """The cost model (sim.cost.ForwardCost) of one layer of `model` (its weights' residency, no
    LM head, no launches) on the profile of calibration figures `figures` (Calibration.figures_of's,
    every field in place; any verify_seqs left out)."""
    import yaml

    from sim.cost import ForwardCost
    from sim.hardware import hardware_from_node
    from sim.specio import Node
    from validation.profile import profile_yaml
    priced = {k: v for k, v in figures.items() if k != "verify_seqs"} | {"layer_s": 0.0}
    doc = yaml.safe_load(profile_yaml(priced, "in-place layer", 1, "pricing"))
    hw = hardware_from_node(Node(doc, None, "hardware"), Path(".")).for_weights(model.weight_bytes)
    return ForwardCost(model, hw, layers=1, lm_head=False)


def layer_price(figures: dict, model: ModelSpec):
    """The cost model's price of one later layer of `model` (the target's shape, its weights'
    residency) but for its host time, on the profile of calibration figures `figures`
    (_one_layer): a function of (rows, keys) -> seconds, for `rows` sequences decoding one
    token each over `keys` keys in all (their products at gemm_step's factor, attention over the
    keys, elementwise passes; no launches)."""
    from sim.cost import Work
    cost = _one_layer(figures, model)
    return lambda rows, keys: float(cost(Work(tokens=rows, seqs=rows, pairs=keys, kv_read=keys, lm_tokens=0)).time)


def attention_price(figures: dict, model: ModelSpec):
    """The cost model's price of one layer's attention of `model` on the profile of `figures`
    (_one_layer): a function of (seqs, q, keys) -> seconds, for `seqs` sequences each verifying
    a chain of q query tokens (q = 1: decoding) over `keys` keys in all, the chains' own
    included (as the engine's kv_lens count them and the simulator's scheduler lays them out):
    the layer's price less its token part (products, elementwise passes), so its attention's
    roofs and everything the profile charges beside them (fused_*, multi_query_us and beyond)."""
    from sim.cost import Work, alike_rows
    cost = _one_layer(figures, model)

    def price(seqs: int, q: int, keys: float) -> float:
        t = q - 1  # drafted tokens a sequence
        multi = alike_rows(seqs * q, keys, seqs) if q > 1 else {}
        work = Work(tokens=seqs * q, seqs=seqs, pairs=q * (keys - seqs * t) + seqs * t * (t + 1) // 2,
                    kv_read=keys - seqs * t, lm_tokens=0, **multi)
        return float(cost(work).time) - float(cost._token_part(seqs * q, 0)[0])
    return price


def verify_seq_table(t: dict, price, rows=REUSE_ROWS) -> dict:
    """{"verify_seqs": {q: [[seqs, us], ...]}} (hardware.verify_seqs) from insitu_probe's times
    `t`: at each rows value of two sequences or more (a chain's fused group call), a later
    layer's attention call verifying chains of q query tokens less its price (`price`:
    attention_price), less the plain decoding run's call less its price at the same sequences,
    a sequence's share (never negative). Decoding's own excess is taken off, since nothing it
    has prices the verifying sequences (and it cancels the host's speed between the runs).
    Empty where the probe timed no attention."""
    table: dict = {}
    for q in VERIFY_ROWS:
        curve = []
        for r in rows:
            got = [f"verify{q}attention{r}", f"verify{q}keys{r}", f"reuseattention{r}", f"reusekeys{r}"]
            if r > 1 and all(k in t for k in got):
                chain, chain_keys, plain, plain_keys = (t[k] for k in got)
                excess = (chain - price(r, q, chain_keys)) - (plain - price(r, 1, plain_keys))
                curve.append([r, round(max(0.0, excess) / r * 1e6, 2)])
        if curve:
            table[q] = curve
    return {"verify_seqs": table} if table else {}


def layer_in_place(t: dict, price, rows=REUSE_ROWS) -> dict:
    """{"layer_rows": [[rows, seconds beyond the price, seconds as timed, keys], ...]} from
    insitu_probe's times `t` (a later layer of the context model, whole, in the engine's
    decoding steps of each rows value, and the keys those steps attend to) less `price(rows,
    keys)`, the cost model's price of all but its host time (layer_price); where the probe ran
    one sequence, also "layer_s": that row's excess (never negative), the host time a layer the
    cost model charges (launch_us). Empty where the probe timed no layer."""
    out = []
    for r in rows:
        if f"reuseinplace{r}" in t:
            timed, keys = t[f"reuseinplace{r}"], t[f"reusekeys{r}"]
            out.append([r, timed - price(r, keys), timed, keys])
    got = {"layer_rows": out} if out else {}
    if out and out[0][0] == 1:
        got["layer_s"] = max(0.0, out[0][1])
    return got
