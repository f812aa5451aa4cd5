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

from sim.cost import ACT_BYTES, Cost, ForwardCost, Work, alike_rows, compute_dtype, reuse_factor, row_efficiency, step_factor
from sim.hardware import HardwareSpec
from sim.models import ModelSpec


def eagle_head(target: ModelSpec) -> ModelSpec:
    return replace(target, name=f"{target.name}-eagle-head", layers=1, experts=0, active_experts=0,
                   shared_experts=0, expert_ffn=0, dense_layers=0, mtp_modules=0)


def mtp_module(target: ModelSpec) -> ModelSpec:
    return replace(target, name=f"{target.name}-mtp-module", layers=1,
                   dense_layers=0 if target.experts else 1, mtp_modules=0)


def linear_cost(d_in: int, d_out: int, tokens, model: ModelSpec, hw: HardwareSpec, tp: int, count: int = 1,
                scale: float = 1.0, part: str = "layers") -> Cost:
    """`count` weight matrices of d_in x d_out applied to `tokens` tokens (weights read once),
    each at its shape's (or size's) measured rate for that many rows (sim.cost.row_efficiency)
    in a step's order (sim.cost.step_factor of `part`, "lm" for an LM head), as the target's own
    matrices are priced; `scale` on their compute time (sim.cost.reuse_factor)."""
    params = count * d_in * d_out
    f = 2.0 * params * tokens / tp
    b = params * model.bytes_per_weight / tp + tokens * count * (d_in + d_out) * ACT_BYTES / tp
    eff = row_efficiency(hw, d_in * d_out * model.bytes_per_weight / tp, tokens, (d_in, d_out / tp))
    c = f / (hw.peak(compute_dtype(model)) * hw.eta_compute * eff) * scale * step_factor(hw, tokens, part)
    m = b / (hw.mem_bw * hw.eta_memory)
    return Cost(time=max(c, m) + hw.launch_s, flops=f, bytes=b, compute_time=c, memory_time=m)


def fused_input_cost(spec: ModelSpec, hw: HardwareSpec, tp: int, tokens) -> Cost:
    """An EAGLE head's or MTP module's input over `tokens` rows (engine.drafting.heads.FeatureHead.inputs):
    its [features; embedding] 2h -> h product (linear_cost), and where the profile timed the rest
    in the engine (hardware.draft_input_s a call, draft_input_row_s a row: the embedding gather,
    two norms, the concatenation, the call's own host time), that in place of the product's
    launch_s (the family's inputs read 0.67-0.84 of the engine's priced as a product and a launch:
    validation/results/cpu-epyc-zen3/0.42.0/drafter_parts.txt)."""
    h = spec.hidden
    c = linear_cost(2 * h, h, tokens, spec, hw, tp)
    if hw.draft_input_s or hw.draft_input_row_s:
        c = c._replace(time=c.time - hw.launch_s + hw.draft_input_s + hw.draft_input_row_s * tokens)
    return c


def add(*costs: Cost) -> Cost:
    return Cost(time=sum(c.time for c in costs), flops=sum(c.flops for c in costs),
                bytes=sum(c.bytes for c in costs), compute_time=sum(c.compute_time for c in costs),
                memory_time=sum(c.memory_time for c in costs))


def drafter_host_time(hw: HardwareSpec, n: int, rows, tree_levels: bool = False, catch_up: bool = False) -> float:
    """Host time of drafter passes over n sequences, `rows` the query rows of each pass: per pass
    (pass_overhead_s), the first pass's fixed part and per sequence (draft_first_s, draft_seq_s)
    and each later one's (draft_pass_s, draft_pass_seq_s; the first pass's where every pass
    catches up as a first pass does, `catch_up`: MTP's modules, each with its own committed
    entries and features), and where the later passes are tree levels (EAGLE's), per row of one
    beyond one per sequence (draft_node_s: the further nodes the sequences expand; a chain has
    none, and a draft model's or MTP module's extra rows are catch-up entries, not nodes)."""
    if not rows:
        return 0.0
    later = rows[1:]
    extra = sum(max(0, r - n) for r in later) if tree_levels else 0
    first = hw.draft_first_s + n * hw.draft_seq_s
    per_later = first if catch_up else hw.draft_pass_s + n * hw.draft_pass_seq_s
    return len(rows) * hw.pass_overhead_s + first + len(later) * per_later + extra * hw.draft_node_s


def pass_rows(p, n: int) -> tuple[int, int, int]:
    """A drafter pass over n sequences as (query rows, LM-head rows, sequences with several query
    rows): an int is a pass whose every row gets logits, and where a pass does not say how many
    sequences have several rows, all n have when it has more rows than sequences (uniform rows)."""
    rows = (p, p) if isinstance(p, int) else tuple(int(x) for x in p)
    tok, lm = rows[0], rows[1]
    return tok, lm, rows[2] if len(rows) > 2 else (n if tok > n else 0)


class PassPricer:
    """Prices sequential drafter passes for n sequences: pass j runs `passes[j]` rows (an int, or
    (query rows, LM-head rows) when only some rows need logits, e.g. the committed tokens a
    drafter catches up on, or (query rows, LM-head rows, sequences with several rows), see
    pass_rows) with drafter context Σctx + (j+1)·n (each pass appends one position per sequence).

    A catch-up pass (the first, or every one where `catch_up`) takes the target's attention
    paths as its rows fall (ForwardCost: Work.mixed, multi_tokens, multi_kv): a sequence catching
    up on several entries attends in the fused call, and where others have one entry they attend
    in a call of their own (the engine's drafters run kernels/attention.py as the target does).
    Tree levels do not: what their further nodes cost is draft_node_s's measure. A later pass
    whose sequences have one query row each, a node of the drafted tree (a chain's, the draft
    model's), pays the tree's mask beyond a plain decode, tree_row_s a layer (tree_rows).

    For a given (n, passes) everything but attention is fixed and attention is linear in Σctx on
    each roof, so a compiled form evaluates a step with a few multiply-adds per pass."""

    MAX_COMPILED = 4096  # distinct (n, passes) kept; catch-up passes after admissions vary widely

    def __init__(self, spec: ModelSpec, hw: HardwareSpec, tp: int, fuse_input: bool = False, tree_levels: bool = False,
                 catch_up: bool = False, shared_lm: bool = False, layers_again: bool = True):
        """fuse_input: an EAGLE/MTP drafter first projects [hidden; embedding] (2h) down to h;
        tree_levels: the later passes are tree levels; catch_up: every pass catches up as a first
        pass does (drafter_host_time); shared_lm: its LM head is the target's (EAGLE's, MTP's);
        layers_again: every pass runs the same layers (not MTP's, a module each)."""
        self.fwd = ForwardCost(spec, hw, tp)
        self.spec, self.hw, self.tp, self.fuse, self.levels = spec, hw, tp, fuse_input, tree_levels
        self.catch_up, self.shared_lm, self.layers_again = catch_up, shared_lm, layers_again
        self._compiled: dict[tuple, tuple] = {}

    def scale(self, j: int, tok: int, lm: int) -> tuple[float, float]:
        """Pass j's factors on its layers' and LM head's products (sim.cost.reuse_factor): the
        first pass's LM head where it is the target's, used right after the target's forward;
        a later pass's LM head, and its layers where every pass runs the same, used a pass before."""
        hw = self.hw
        if j == 0:
            return 1.0, reuse_factor(hw, lm, "first") if self.shared_lm else 1.0
        return (reuse_factor(hw, tok, "later_layer") if self.layers_again else 1.0), reuse_factor(hw, lm, "later_lm")

    def tree_rows(self, j: int, n: int, several: int) -> float:
        """Pass j's tree mask beyond a plain decode's, per layer (hardware.tree_row_s): a later
        pass, not a catch-up, in which some sequence has one query row, a node of its drafted tree
        (a chain's next node). A catch-up pass's and a multi-row tree level's rows take the
        verification's paths, whose measures include their masks."""
        return self.fwd.n_layers * self.hw.tree_row_s if j and not self.catch_up and several < n else 0.0

    def paths(self, j: int, n: int, tok: int, several: int, ctx_sum) -> dict:
        """Pass j's Work.mixed, multi_* and own_* at Σctx = ctx_sum: a catch-up pass's `several`
        sequences with several rows attend to their context (the mean), the j positions earlier
        passes appended and their rows, taken alike (sim.cost.alike_rows); the others have one
        row each."""
        if not several or (j and not self.catch_up):
            return {"mixed": 0} | alike_rows(0, 0, 0)
        rows = tok - (n - several)
        return {"mixed": int(several < n)} | alike_rows(rows, several * (ctx_sum / n + j) + rows, several)

    def _compile(self, n: int, passes: tuple[tuple[int, int, int], ...]) -> tuple:
        """(fixed Cost of all passes, [(c0, c1, m0, m1, f0, f1, b0, b1) per pass], [(k0, k1, d0, d1) per pass]
        or [], several_rows) such that pass j's attention at Σctx = x costs max(c0 + c1·x, m0 + m1·x) seconds
        (their sum: attn_dense), f0 + f1·x FLOPs, b0 + b1·x bytes; with a measured kv_sizes curve
        its memory roof adds the gather of k0 + k1·x bytes at that size's rate (not linear in x), d0 +
        d1·x of them the decoding sequences' (sim.cost.ForwardCost.kv_time);
        and the fused attention beside the roofs, several_rows [(multi_tokens, kv0, kv1, multi_seqs, own) per catch-up
        pass]: Work.multi_tokens, multi_kv = kv0 + kv1·x and multi_seqs, all in calls of their own where `own` (paths)."""
        fwd = self.fwd
        t = f = b = c = m = 0.0
        several_rows: list = []
        lines, kv_bytes = [], []  # kv_bytes: each pass's gathered bytes at Σctx = x, (k0, k1, d0, d1) (measured curves)
        t += drafter_host_time(self.hw, n, [tok for tok, _, _ in passes], self.levels, self.catch_up)
        for j, (tok, lm, several) in enumerate(passes):
            w0 = fwd(Work(tok, n, 0, 0, lm))  # attention with no context: isolates the linear part
            w1 = fwd(Work(tok, n, max(1, tok // max(n, 1)), 1, lm))  # one more key per sequence's query
            base = fwd._token_part(tok, lm)  # unscaled: the attention's part below is w0 less it
            sc = self.scale(j, tok, lm)
            part = fwd._token_part(tok, lm, sc) if sc != (1.0, 1.0) else base
            t, f, b, c, m = t + part[0], f + part[1], b + part[2], c + part[3], m + part[4]
            at0, at1 = self.paths(j, n, tok, several, 0), self.paths(j, n, tok, several, 1)  # keys linear in Σctx
            t += fwd.query_host(tok, n, at0["mixed"])  # several query tokens per sequence (a tree level, a catch-up)
            t += self.tree_rows(j, n, several)
            if at0["multi_tokens"]:  # priced in __call__: its rate by the keys' size is not linear in Σctx
                several_rows.append((at0["multi_tokens"], at0["multi_kv"], at1["multi_kv"] - at0["multi_kv"], at0["multi_seqs"],
                                     bool(at0["own_seqs"])))
            if self.fuse:
                fused = fused_input_cost(self.spec, self.hw, self.tp, tok)
                t, f, b, c, m = t + fused.time, f + fused.flops, b + fused.bytes, c + fused.compute_time, m + fused.memory_time
            # attention of pass j at Σctx = x has kv = x + (j+1)·n; per unit of kv the roofs grow by (w1 - w0)
            dc, dm = w1.compute_time - w0.compute_time, w1.memory_time - w0.memory_time
            df, db = w1.flops - w0.flops, w1.bytes - w0.bytes
            kv0 = (j + 1) * n
            c0, m0 = w0.compute_time - base[3] + dc * kv0, w0.memory_time - base[4] + dm * kv0
            f0, b0 = w0.flops - base[1] + df * kv0, w0.bytes - base[2] + db * kv0
            if fwd.gather_by_size:  # the gather's time by its size: its bytes kept, read in __call__
                m0, dm = fwd.attn_act_per_tok * tok / fwd.bw, 0.0
                # and the decoding sequences' share of them (all but the paths' several)
                several_kv = at1["multi_kv"] - at0["multi_kv"]
                kv_bytes.append((fwd.kv_tok * (kv0 + tok), fwd.kv_tok,
                                 fwd.kv_tok * (kv0 + tok - at0["multi_kv"] - at0["multi_tokens"]),
                                 fwd.kv_tok * (1 - several_kv)))
            lines.append((c0, dc, m0, dm, f0, df, b0, db))
        return Cost(t, f, b, c, m), lines, kv_bytes, several_rows

    def direct(self, n: int, ctx_sum: int, passes) -> Cost:
        """The same price, pass by pass through the cost model (the definition; tests compare)."""
        costs = []
        rows = [pass_rows(p, n) for p in passes]
        for j, (tok, lm, several) in enumerate(rows):
            kv = ctx_sum + (j + 1) * n
            costs.append(self.fwd(Work(tok, n, kv * max(1, tok // max(n, 1)), kv, lm,
                                       **self.paths(j, n, tok, several, ctx_sum)), self.scale(j, tok, lm)))
            if self.fuse:
                costs.append(fused_input_cost(self.spec, self.hw, self.tp, tok))
            costs.append(Cost(time=self.tree_rows(j, n, several), flops=0.0, bytes=0.0, compute_time=0.0, memory_time=0.0))
        host = drafter_host_time(self.hw, n, [tok for tok, _, _ in rows], self.levels, self.catch_up)
        return add(*costs, Cost(time=host, flops=0.0, bytes=0.0, compute_time=0.0, memory_time=0.0))

    def __call__(self, n: int, ctx_sum: int, passes) -> Cost:
        key = (n, tuple(passes))
        comp = self._compiled.get(key)
        if comp is None:
            if len(self._compiled) >= self.MAX_COMPILED:
                self._compiled.clear()
            comp = self._compiled[key] = self._compile(n, tuple(pass_rows(p, n) for p in key[1]))
        fixed, lines, kv_bytes, several_rows = comp
        t, f, b, c, m = fixed
        x = ctx_sum
        for tokens, kv0, kv1, seqs, own in several_rows:
            kv = kv0 + kv1 * x
            t += self.fwd.fused_time(tokens, kv, seqs, *((tokens, kv, seqs) if own else ()))
        attention = self.fwd.attention
        for j, (c0, c1, m0, m1, f0, f1, b0, b1) in enumerate(lines):
            ca, ma = c0 + c1 * x, m0 + m1 * x
            if kv_bytes:
                k0, k1, d0, d1 = kv_bytes[j]
                ma += self.fwd.kv_time(k0 + k1 * x, d0 + d1 * x)
            t += attention(ca, ma)
            f += f0 + f1 * x
            b += b0 + b1 * x
            c += ca
            m += ma
        return Cost(t, f, b, c, m)


MEDUSA_OPS = 4  # the heads' operations beyond their two products: bias add, SiLU, residual add, top-k (op_s each)


def medusa_cost(target: ModelSpec, hw: HardwareSpec, tp: int, heads: int, n: int, shared_lm_head: bool = False,
                nodes: int = 0) -> Cost:
    """K heads in one call over n last hidden states: each a residual h x h block + an LM head,
    its own (Medusa §2.1.1) or the target's, read once for all K x n rows; the top-k over each
    head's logits costs hardware.logit_s per element (`hw` as drafters see it: HardwareSpec.drafter). Not a forward pass: no pass_overhead_s,
    MEDUSA_OPS small ops beyond the products' launches (hardware.op_s each, launch_s where not
    measured), and its host work around the call (the step's plan, picking and recording the
    drafts): medusa_first_s, medusa_seq_s per sequence and medusa_node_s per sequence and node of
    its `nodes`-node tree beyond one a head, where the profile measured them (since 0.45.0), else
    a first drafter pass's draft_first_s and draft_seq_s per sequence."""
    h = target.hidden
    if hw.medusa_first_s is not None:
        around = hw.medusa_first_s + n * ((hw.medusa_seq_s or 0.0) + max(0, nodes - heads) * (hw.medusa_node_s or 0.0))
    else:
        around = hw.draft_first_s + n * hw.draft_seq_s
    host = Cost(time=MEDUSA_OPS * (hw.op_s or hw.launch_s) + around + hw.logit_s * heads * n * target.vocab,
                flops=0.0, bytes=0.0, compute_time=0.0, memory_time=0.0)
    # the target's LM head is used again right after the target's forward (sim.cost.reuse_factor)
    lm = (linear_cost(h, target.vocab, heads * n, target, hw, tp, scale=reuse_factor(hw, heads * n, "first"), part="lm")
          if shared_lm_head else linear_cost(h, target.vocab, n, target, hw, tp, count=heads, part="lm"))
    return add(linear_cost(h, h, n, target, hw, tp, count=heads), lm, host)
