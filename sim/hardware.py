"""Device specs: datasheet ceilings plus the calibratable efficiency and overhead fields (DESIGN.md §3)."""
from __future__ import annotations

import re
from dataclasses import MISSING, dataclass, fields, replace
from pathlib import Path

from sim.specio import Node, is_file, load_yaml

PRESETS = Path(__file__).with_name("presets") / "hardware.yaml"
DTYPES = ("fp32", "bf16", "fp8")


@dataclass(frozen=True)
class HardwareSpec:
    """One device. SI units inside (FLOP/s, B/s, bytes, seconds); YAML uses TFLOP/s, TB/s, GB, µs."""

    name: str
    description: str
    flops: dict  # dtype -> dense FLOP/s; a dtype absent here runs at the next wider one
    mem_bw: float  # B/s
    mem_bytes: float
    link_bw: float  # B/s per direction, tensor-parallel interconnect
    devices_per_node: int
    eta_compute: float  # achievable fraction of peak FLOP/s
    eta_memory: float  # achievable fraction of peak bandwidth
    launch_s: float  # per kernel launch
    step_overhead_s: float  # host work per scheduler step
    seq_overhead_s: float  # host work per sequence per step (scheduling, sampling bookkeeping)
    alloc_op_s: float  # one page allocation or free
    allreduce_latency_s: float
    # a matmul over M token rows reaches M / (M + gemm_half_rows) of its compute rate (small-M
    # GEMMs on CPUs re-stream and pack weights; 0: the plain roofline, as on the GPU presets)
    gemm_half_rows: float = 0.0
    # host time of one small elementwise op (a bias add, an activation, a top-k on a few rows), as
    # the calibration's one-element op reads it; 0: launch_s. launch_s is a layer's host time over
    # its KERNELS_PER_LAYER kernels, attention's wrapper among them (on a CPU 105.7 us a kernel
    # against 7.5 us an op): Medusa's heads charged their four ops at it ran 0.39 ms long
    op_s: float = 0.0
    eta_kv: float = 1.0  # achievable fraction of eta_memory when attention reads (gathers) paged KV
    # measured eta_kv per gather size: ((bytes, eta_kv), ...), sizes ascending. A layer's gather of
    # that many bytes (the K and V of every sequence in the pass) reads at eta_kv; sizes
    # interpolate in log space, held beyond the ends. It replaces eta_kv where a calibration
    # measured it: a CPU's gather slows once its copy spills the last-level cache (here 4.0-4.4
    # GB/s up to 34 MB a call, 3.1 GB/s at 134 MB: validation/probes.py kv_gather_probe)
    kv_sizes: tuple = ()
    pass_overhead_s: float = 0.0  # host time of one drafter forward pass beyond its kernels' launches
    # host time a target forward pass pays to check its step's index tensors (the engine checks
    # them once per pass on a CPU; its drafters, which lay out their own passes, do not): a bare
    # target forward costs pass_overhead_s + index_check_s beyond its layers
    index_check_s: float = 0.0
    # host time per layer of a drafter's later pass whose sequences each have one query row, a
    # node of its drafted tree (a chain's next node; engine.drafting.store.pack), beyond the plain
    # decode it is priced as: the CPU reference's visibility mask scatters the node's ancestors'
    # bits (validation.probes.tree_row_probe). A tree level with several rows a sequence pays the
    # verification's multi-query figures instead.
    tree_row_s: float = 0.0
    # measured matmul efficiency: ((weight_bytes, ((rows, fraction), ...)), ...), sizes ascending,
    # every curve on the same rows. A product of an M-row activation with a weight matrix of that
    # many bytes runs at `fraction` x peak·eta_compute; rows interpolate linearly, sizes in log
    # space, both held beyond the ends. It replaces gemm_half_rows where a calibration measured
    # it: CPU BLAS switches kernels with the row count (a 4-row product can cost 1.5x a 3-row one)
    # and its rate depends on the matrix size (validation/calibrate.py)
    gemm_rows: tuple = ()
    # the same curves measured with the weights already in the last-level cache (a pass over a
    # pool of matrices that fits it, swept once before the timed pass), and that cache's bytes:
    # a model whose weights fit (for_weights) is priced on these, since its forward passes find
    # the weights the previous pass left there (here the family's 16 MB in a 300 MB L3: its 1-row
    # products run about 2x faster than read from memory); empty or 0: gemm_rows for every model
    gemm_rows_warm: tuple = ()
    cache_bytes: float = 0.0
    # measured matmul curves of particular matrix shapes: (((k, n), ((rows, fraction), ...)), ...)
    # for `x @ W.T`, x (rows, k) and W (n, k). A matrix of a measured shape is priced on its own
    # curve (rows interpolate linearly, held beyond the ends), any other on gemm_rows by size: a
    # CPU's rate depends on the shape, not only the size (on a 2-core EPYC VM a Llama-shaped
    # down projection, 8192 x 2048, ran 1.2-1.6x its size's probes at 4-64 rows, the family's LM
    # head, 256 x 4096, 0.70-0.87x: bench/results/matmul-shapes-2026-12-03.txt). The calibration
    # measures the shapes of the models it is given (validation/calibrate.py)
    gemm_shapes: tuple = ()
    # the same with the weights in the last-level cache (as gemm_rows_warm): a resident model's
    # matrices of these shapes are priced on them
    gemm_shapes_warm: tuple = ()
    # kv_sizes measured with the gathered K and V already in that cache (calls after several;
    # kv_sizes is then the first after the cache is swept out): a pass of a model whose weights
    # fit reads at these rates while its layers' gathers fit beside the weights too (here the
    # family's decode of 16 sequences at 2,048 keys, 32 MiB a layer, gathered at 4.8 GB/s warm
    # against 2.8 cold); empty: kv_sizes at every size
    kv_sizes_warm: tuple = ()
    # measured decode attention by attention geometry: (((kv_heads, group, head_dim), ((bytes,
    # eta), ...)), ...), as kv_sizes (eta against the memory rate, sizes interpolated in log
    # space by the layer's whole gather), with the products the cost model prices on the compute
    # roof taken off. A model of a measured geometry (sim.cost.attention_geometry) prices its
    # sequences with one query token on its own curve, the others on kv_sizes: the CPU
    # reference's per-head products cost by the geometry, not only the bytes (a decode call of 2
    # query heads per KV head took 1.2-1.4x one of 1 over the same 32 MiB: validation/probes.py
    # decode_probe).
    # Empty: kv_sizes for every sequence
    kv_decode: tuple = ()
    kv_decode_warm: tuple = ()  # the same with the K and V in the last-level cache (as kv_sizes_warm)
    # products of weights used again within a speculative step, over the warm curves' price at
    # that many rows: ((rows, first, later_layer, later_lm), ...), rows ascending (interpolated,
    # held beyond the ends): a drafter's first pass's LM head where it is the target's (used right
    # after the target's forward), and every later pass's layer products and LM head (used a pass
    # before). Applies where the warm curves price the model (resident_bytes); empty: 1 throughout
    # (validation.reuse times them in the engine; here 0.62-0.84 at one row, 0.73-0.93 at four)
    gemm_reuse: tuple = ()
    # the target's products in a step of plain decoding, over the warm curves' price at that many
    # rows: ((rows, layers, lm_head), ...), rows ascending (interpolated, held beyond the ends):
    # its layers' products and its LM head's, timed in the engine with gemm_reuse's parts
    # (validation.reuse; until 0.42.0 in a replay of a step's order of products). The cost model multiplies every product it prices
    # on those curves by the factor of its kind, a drafter's too, gemm_reuse's parts excepted
    # (sim.cost.step_factor). Applies where the warm curves price the model; empty: 1 throughout
    gemm_step: tuple = ()
    # set by for_weights, not read from a profile: the served model's weights (bytes per device)
    # where they fit the last-level cache and warm curves apply, else 0
    resident_bytes: float = 0.0
    # host time per layer that a pass pays when some sequence in it has several query tokens
    # (verify or prefill), beyond a decode pass's: another attention path (the CPU reference's
    # padded fused attention; plan/setup of tree-attention kernels on a GPU)
    multi_query_s: float = 0.0
    # host time per layer beyond multi_query_s when several sequences have several query tokens
    # (a batch of chains or trees: the CPU reference's padded fused-attention path)
    batch_query_s: float = 0.0
    # host time per layer beyond batch_query_s when, besides sequences with several query tokens,
    # others have one (a chain beside a sequence that drafted nothing, a prefill chunk beside
    # decodes: the CPU reference attends to the single queries in another call)
    mixed_query_s: float = 0.0
    # a drafter's host work around its passes (beyond each forward call's pass_overhead_s): per
    # step's first pass (draft_first_s) and per sequence of it (building its rows from the committed
    # tokens and features, reading back its drafts: draft_seq_s), and per later pass (a tree level or
    # chain depth: the new rows only) and per sequence of it (draft_pass_s, draft_pass_seq_s); a
    # profile without draft_pass_seq_us charges draft_seq_us every pass, and an MTP chain, whose
    # modules each catch up their own entries (sim/schemes/mtp.py), a first pass's every pass
    # (validation.drafter_host measures them)
    draft_first_s: float = 0.0
    draft_seq_s: float = 0.0
    draft_pass_s: float = 0.0
    draft_pass_seq_s: float = 0.0
    # host time per row of a later drafter pass beyond one per sequence (the further nodes of a
    # tree level a sequence expands: its features and logits picked out, its children's top-k;
    # a chain has none)
    draft_node_s: float = 0.0
    # Medusa's host work around its heads' call, where measured (validation.drafter_host.medusa_probe;
    # None: the first pass's draft_first_s and draft_seq_s): fixed, per sequence, and per sequence
    # and node of its tree beyond one a head (laid out a node at a time)
    medusa_first_s: float | None = None
    medusa_seq_s: float | None = None
    medusa_node_s: float | None = None
    # an EAGLE head's or MTP module's fused input beyond its 2h -> h product (the embedding
    # gather, two norms, the concatenation, the call), timed in the engine (validation.reuse):
    # fixed and per row; where measured, in place of the product's launch_s (sim.drafters.fused_input_cost)
    draft_input_s: float = 0.0
    draft_input_row_s: float = 0.0
    # prompt lookup's host time in a step (engine.ngram's planner): per call and per sequence
    # (0: unmeasured; the ngram scheme's own host_us per sequence, else 20 us)
    ngram_call_s: float = 0.0
    ngram_seq_s: float = 0.0
    # attention's score and value products reach eta_attn x peak·eta_compute (fused GPU kernels: 1;
    # the CPU reference's masked products over gathered keys run well below its GEMM rate)
    eta_attn: float = 1.0
    # attention as the CPU reference runs it: it gathers each sequence's paged K/V into a dense
    # copy, then multiplies every query of the sequence with all of it (masked products
    # included): its time is the sum of the two roofs, not their max, and its products cover
    # queries x gathered keys (a prefill chunk's causal half too), not only the visible pairs
    attn_dense: bool = False
    # time per query token per query head that attention spends on a sequence with several query
    # tokens (verifying drafts, or a prefill chunk) beyond its products and gather: the CPU
    # reference scatters each such query's rows, mask row and output in its padded fused call and
    # walks its ancestor bits, or builds its mask row in a call of the sequence's own
    # (validation/probes.py `attention_figures`); added beside the roofs; 0 where it hides under
    # them (the GPU presets). Before 0.23.0 charged for verifying sequences only
    fused_query_s: float = 0.0
    # and per key such a sequence attends to, per query head, beyond what the KV gather rate
    # (eta_kv, measured on decoding sequences) charges for it: the padded call's transposed copies
    # and its masked per-key work (the same probes); 0: none (the GPU presets)
    fused_key_s: float = 0.0
    # measured per query rows and size: ((bytes, ((rows, seconds per key and query head), ...)),
    # ...), both ascending: what a sequence verifying `rows` query tokens pays per key it attends
    # to, per query head, beyond its gather (at the KV gather rate) and its products (at
    # eta_attn), in the CPU reference's fused call, where the K and V of the pass's sequences
    # with several query tokens are `bytes` a layer (validation/probes.py `fused_rows_curve`).
    # Not linear in the rows: torch's fused attention on 3 or 7 rows read 30-45% slower a key
    # than on 4, and from 48 rows on its per-key part grows again; and 20-30% slower at 16-48 MiB
    # than at 1-8 (2026-12-06, EPYC Zen 3: validation/results/cpu-epyc-zen3/0.50.0/fused_rows.txt,
    # fused_sizes.txt). Rows interpolate linearly, sizes linearly in log size,
    # held beyond the ends; it prices sequences of 2 up to a curve's last rows (the fused group
    # call's most, 64), longer ones (prefill chunks: a call of their own) keep fused_key_s
    # unless fused_own prices them. Empty: fused_key_s for all
    fused_rows: tuple = ()
    # the same, for a sequence's call of its own, by its rows and its own K and V's bytes a
    # layer (validation/probes.py `fused_rows_curve` on OWN_SIZES and OWN_ROWS): the engine gives
    # one to a prefill chunk of more than 64 rows, and to a sequence with 2 to 64 that is the
    # only one in its step (kernels/attention.py), unpadded and unbatched; held beyond its last
    # rows. Empty: such sequences are priced with the others, on fused_rows at their mean rows
    # (before 0.51.0)
    fused_own: tuple = ()
    # measured in place, by query rows: ((rows, ((sequences, seconds), ...)), ...), both ascending:
    # what each of the sequences verifying `rows` query tokens in the fused group call (not a
    # call of their own) adds to a layer's attention beyond everything else the cost model
    # charges for it, when that many sequences verify (validation/reuse.py `verify_seq_table`:
    # the engine's later layers' attention timed where it runs, less its price, less decoding's;
    # its sequences all as long: the padding of calls over sequences of different lengths is
    # priced apart, sim.cost.Work.group_pad). The probes above time the call in a hot loop; in
    # place, after the trace's prompt, the probe read 0-16 us a sequence a layer at 4-64
    # sequences (2026-12-07, EPYC Zen 4: validation/results/cpu-epyc-zen4/0.54.0/). Sequences
    # and rows interpolate linearly, held beyond the ends. Empty: nothing (before 0.54.0)
    verify_seqs: tuple = ()
    # time per activation element of a layer's unfused elementwise passes (norms, rotary
    # embedding, gating, residual adds: sim.cost.elementwise_elems per token), added to the
    # layer's matmuls; 0 where those passes are fused or hide under the roofline (the GPU presets)
    elementwise_s: float = 0.0
    # measured per size: ((elements, seconds per element), ...), sizes ascending: a layer's passes
    # over that many activation elements (a step's tokens x elementwise_elems) run at that
    # average time per element; sizes interpolate in log space, held beyond the ends. It
    # replaces elementwise_s where a calibration measured it: a CPU's passes slow once they
    # leave its caches (timed between a layer's products, as a forward runs them: here 1.1-1.2
    # ns an element from 64 to 4,096 tokens of the family's layer in one calibration, 1.1 ns to
    # 1,024 and 2.3 ns on average at 4,096 in another, where a gate-up output alone is 25 MB;
    # validation/probes.py elementwise_curve)
    elementwise_sizes: tuple = ()
    # time per logit element that the sampling or verification after a pass reads (the argmax,
    # top-k or softmax over each LM-head row: rows x vocab); 0 where it hides under the roofline
    logit_s: float = 0.0
    # host time of the engine's verification around a pass, beyond its logits (validation/host_probes.py
    # `verify_host_probe`): one call per distinct draft shape among the sequences that sample
    # (decoding is the empty shape; every sequence verifying the same static tree or chain shares
    # one call; EAGLE-2's trees differ, one call each), verify_call_s each; a tree's call
    # tree_call_s more plus tree_node_s per node (the walk over its ancestor table); and
    # pack_node_s per drafted node in the step (its query, slot and mask rows packed); and a
    # speculative step's host work beyond a decode's that none of those covers, timed in the engine
    # (validation/reuse.py `spec_rest_figures`, since 0.56.0): spec_step_s a step with drafted
    # sequences, spec_seq_s a drafted sequence (the drafts as a tensor, the verification's longer
    # results, the speculative slots scheduled)
    # time per logit element of a drafter's selection over its LM-head rows (softmax, top-k), which
    # replaces logit_s in drafter passes and Medusa's heads; 0: logit_s
    draft_logit_s: float = 0.0
    # host time per candidate a dynamic-tree drafter scores (EAGLE-2: recording it, choosing the
    # frontier and the kept tree by confidence; validation/host_probes.py `draft_tree_probe`)
    draft_cand_s: float = 0.0
    verify_call_s: float = 0.0
    tree_call_s: float = 0.0
    tree_node_s: float = 0.0
    pack_node_s: float = 0.0
    spec_step_s: float = 0.0
    spec_seq_s: float = 0.0
    # the device's speed over time (sim/speed.py): spells of mean length speed_spell_s, each at a
    # rate drawn from the distribution these quantiles describe (evenly spaced probabilities from
    # 0 to 1; scaled to mean 1); empty (every preset): a constant speed. A shared host's slow
    # spells, which spread a run's latencies (its p99) around the same mean
    speed_rates: tuple = ()
    speed_spell_s: float = 0.0
    # and a slow drift of the same form, multiplying it (empty: none): spells of mean length
    # speed_drift_s at rates from these quantiles (the calibration's windows' mean rates)
    speed_drift_rates: tuple = ()
    speed_drift_s: float = 0.0

    def peak(self, dtype: str) -> float:
        """Peak dense FLOP/s for a compute dtype, falling back to the next wider supported one."""
        for d in DTYPES[DTYPES.index(dtype)::-1]:
            if d in self.flops:
                return self.flops[d]
        raise KeyError(dtype)

    def knee(self, dtype: str = "bf16") -> float:
        """Roofline knee in FLOP/byte at achievable rates."""
        return self.peak(dtype) * self.eta_compute / (self.mem_bw * self.eta_memory)

    def drafter(self) -> "HardwareSpec":
        """This device as a drafter's passes see it: their LM-head rows cost draft_logit_s per
        element (where measured) instead of logit_s."""
        return replace(self, logit_s=self.draft_logit_s) if self.draft_logit_s else self

    @property
    def prices_verification(self) -> bool:
        """Whether this profile prices the engine's verification calls around a pass (a measured
        CPU's does: sim.cost.verify_host)."""
        return bool(self.verify_call_s or self.tree_call_s or self.tree_node_s or self.pack_node_s
                    or self.spec_step_s or self.spec_seq_s)

    @property
    def warm_priced(self) -> bool:
        """Whether the warm matmul curves price this device's products: for_weights found the
        model's weights fit the last-level cache, and warm curves were measured."""
        return bool(self.resident_bytes and self.gemm_rows_warm)

    @property
    def matmul_rows(self) -> tuple:
        """The matmul curves that price this device's products: gemm_rows_warm where they do
        (warm_priced), else gemm_rows."""
        return self.gemm_rows_warm if self.warm_priced else self.gemm_rows

    @property
    def matmul_shapes(self) -> tuple:
        """The shape curves that price this device's matrices of those shapes: gemm_shapes_warm
        where for_weights found the model's weights fit the last-level cache (none there if only
        the cold ones were measured: the warm size curves are then closer), else gemm_shapes."""
        return self.gemm_shapes_warm if self.warm_priced else self.gemm_shapes

    def for_weights(self, weight_bytes: float) -> "HardwareSpec":
        """This device serving a model with `weight_bytes` of weights per device: its products
        (and its gathers, while they fit beside the weights) priced on the warm curves where those
        weights fit the last-level cache."""
        warm = (self.gemm_rows_warm or self.kv_sizes_warm or self.kv_decode_warm) and 0 < weight_bytes <= self.cache_bytes
        resident = float(weight_bytes) if warm else 0.0
        return replace(self, resident_bytes=resident) if resident != self.resident_bytes else self

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def to_profile(self) -> dict:
        """The YAML profile form (the units `hardware_from_node` reads)."""
        us = 1e6
        table = {"gemm_rows": _gemm_rows_dict(self.gemm_rows)} if self.gemm_rows else {}
        table |= {"gemm_rows_warm": _gemm_rows_dict(self.gemm_rows_warm)} if self.gemm_rows_warm else {}
        table |= {"cache_mb": self.cache_bytes / 2**20} if self.cache_bytes else {}
        table |= {"gemm_shapes": _gemm_shapes_dict(self.gemm_shapes)} if self.gemm_shapes else {}
        table |= {"gemm_shapes_warm": _gemm_shapes_dict(self.gemm_shapes_warm)} if self.gemm_shapes_warm else {}
        for key, curve, size_unit, value_unit in (("kv_sizes", self.kv_sizes, 2**20, 1.0),
                                                  ("kv_sizes_warm", self.kv_sizes_warm, 2**20, 1.0),
                                                  ("elementwise_sizes", self.elementwise_sizes, 1e6, 1e-9)):
            table |= {key: [[n / size_unit, x / value_unit] for n, x in curve]} if curve else {}
        for key, curves in (("fused_rows", self.fused_rows), ("fused_own", self.fused_own)):
            table |= {key: {b / 2**20: [[r, x * 1e9] for r, x in c] for b, c in curves}} if curves else {}
        table |= {"verify_seqs": {r: [[n, x * us] for n, x in c] for r, c in self.verify_seqs}} if self.verify_seqs else {}
        for key, curves in (("kv_decode", self.kv_decode), ("kv_decode_warm", self.kv_decode_warm)):
            table |= {key: {geometry_label(g): [[n / 2**20, x] for n, x in c] for g, c in curves}} if curves else {}
        return {"description": self.description, "tflops": {d: f / 1e12 for d, f in self.flops.items()},
                "memory_tb_s": self.mem_bw / 1e12, "memory_gb": self.mem_bytes / 1e9,
                "interconnect_gb_s": self.link_bw / 1e9, "devices_per_node": self.devices_per_node,
                "eta_compute": self.eta_compute, "eta_memory": self.eta_memory, "launch_us": self.launch_s * us,
                "step_overhead_us": self.step_overhead_s * us, "seq_overhead_us": self.seq_overhead_s * us,
                "alloc_op_us": self.alloc_op_s * us, "op_us": self.op_s * us, "allreduce_latency_us": self.allreduce_latency_s * us,
                "gemm_half_rows": self.gemm_half_rows, "eta_kv": self.eta_kv,
                "pass_overhead_us": self.pass_overhead_s * us, "index_check_us": self.index_check_s * us,
                "tree_row_us": self.tree_row_s * us,
                "multi_query_us": self.multi_query_s * us,
                "batch_query_us": self.batch_query_s * us, "mixed_query_us": self.mixed_query_s * us,
                "draft_first_us": self.draft_first_s * us, "draft_seq_us": self.draft_seq_s * us,
                "draft_pass_us": self.draft_pass_s * us, "draft_pass_seq_us": self.draft_pass_seq_s * us,
                "draft_node_us": self.draft_node_s * us,
                "draft_input_us": self.draft_input_s * us, "draft_input_row_us": self.draft_input_row_s * us,
                "ngram_call_us": self.ngram_call_s * us, "ngram_seq_us": self.ngram_seq_s * us,
                "eta_attn": self.eta_attn,
                "attn_dense": self.attn_dense, "fused_query_us": self.fused_query_s * 1e6,
                "fused_key_ns": self.fused_key_s * 1e9,
                "elementwise_ns": self.elementwise_s * 1e9,
                "logit_ns": self.logit_s * 1e9, "draft_logit_ns": self.draft_logit_s * 1e9,
                "draft_cand_us": self.draft_cand_s * us, "verify_call_us": self.verify_call_s * us,
                "tree_call_us": self.tree_call_s * us, "tree_node_us": self.tree_node_s * us,
                "pack_node_us": self.pack_node_s * us, "spec_step_us": self.spec_step_s * us,
                "spec_seq_us": self.spec_seq_s * us, "speed_spell_ms": self.speed_spell_s * 1e3,
                "speed_drift_ms": self.speed_drift_s * 1e3} | table \
            | ({"speed_rates": list(self.speed_rates)} if self.speed_rates else {}) \
            | ({"speed_drift_rates": list(self.speed_drift_rates)} if self.speed_drift_rates else {}) \
            | ({"gemm_reuse": [list(r) for r in self.gemm_reuse]} if self.gemm_reuse else {}) \
            | ({"gemm_step": [list(r) for r in self.gemm_step]} if self.gemm_step else {}) \
            | ({"medusa_first_us": self.medusa_first_s * us, "medusa_seq_us": (self.medusa_seq_s or 0.0) * us,
                "medusa_node_us": (self.medusa_node_s or 0.0) * us} if self.medusa_first_s is not None else {})


_KEYS = ("preset", "description", "tflops", "memory_tb_s", "memory_gb", "interconnect_gb_s",
         "devices_per_node", "eta_compute", "eta_memory", "launch_us", "step_overhead_us",
         "seq_overhead_us", "alloc_op_us", "op_us", "allreduce_latency_us", "gemm_half_rows", "eta_kv", "pass_overhead_us",
         "index_check_us", "tree_row_us", "gemm_rows", "gemm_rows_warm", "gemm_shapes", "gemm_shapes_warm", "cache_mb", "kv_sizes", "kv_sizes_warm", "kv_decode", "kv_decode_warm", "multi_query_us", "batch_query_us",
         "mixed_query_us", "draft_first_us", "draft_seq_us", "draft_pass_us", "draft_pass_seq_us", "gemm_reuse", "gemm_step", "gemm_verify", "draft_node_us",
         "medusa_first_us", "medusa_seq_us", "medusa_node_us", "draft_input_us", "draft_input_row_us", "ngram_call_us", "ngram_seq_us", "eta_attn", "attn_dense", "fused_query_us", "fused_key_ns", "fused_rows", "fused_own", "verify_seqs",
         "elementwise_ns", "elementwise_sizes", "logit_ns", "draft_logit_ns", "draft_cand_us", "verify_call_us", "tree_call_us", "tree_node_us", "pack_node_us", "spec_step_us", "spec_seq_us",
         "speed_rates", "speed_spell_ms", "speed_drift_rates", "speed_drift_ms")


def preset_names() -> list[str]:
    return list(load_yaml(PRESETS, "hardware presets"))


def hardware_from_node(node: Node, base_dir: Path, _seen: tuple[Path, ...] = ()) -> HardwareSpec:
    """A preset name, a path to a YAML profile, or a mapping (optionally starting from `preset:`)."""
    if isinstance(node.value, str):
        name = node.value
        presets = load_yaml(PRESETS, "hardware presets")
        if name in presets:
            return _build(Node(presets[name], str(PRESETS), name), name)
        path = (base_dir / name) if not Path(name).is_absolute() else Path(name)
        if is_file(path):
            if path.resolve() in _seen:
                raise node.error(f"`preset:` cycle: profile {path} is already being read")
            data = load_yaml(path, "hardware profile")
            return _build(Node(data, str(path), ""), path.stem, base_dir=path.parent, _seen=_seen + (path.resolve(),))
        if name.endswith((".yaml", ".yml")):
            raise node.error(f"hardware profile not found: {path}")
        raise node.error(f"unknown hardware preset '{name}'; expected one of: {', '.join(presets)} or a path to a YAML profile")
    return _build(node, "custom", base_dir=base_dir, _seen=_seen)


def _build(node: Node, name: str, base_dir: Path | None = None, _seen: tuple[Path, ...] = ()) -> HardwareSpec:
    f = node.mapping(_KEYS)
    merged: dict = {}
    if "preset" in f:
        base = hardware_from_node(f["preset"], base_dir or Path("."), _seen)
        name = f"{base.name}+custom" if len(f) > 1 else base.name
        merged = base.to_dict()
    elif missing := [k for k in ("tflops", "memory_tb_s", "memory_gb") if k not in f]:
        raise node.error(f"missing required key '{missing[0]}' (or start from `preset:`)")
    if "tflops" in f:
        tf = f["tflops"].mapping(DTYPES)
        if not tf:
            raise f["tflops"].error("expected at least one dtype: " + ", ".join(DTYPES))
        merged["flops"] = {d: tf[d].number(lo=0, lo_open=True, hi=1e6) * 1e12 for d in DTYPES if d in tf}

    def num(key, scale, lo=0.0, hi=None, lo_open=False):
        if key in f:
            return f[key].number(lo=lo, hi=hi, lo_open=lo_open) * scale
        return None

    spec = dict(
        name=name,
        description=f["description"].string() if "description" in f else merged.get("description", name),
        flops=merged.get("flops"),
        mem_bw=num("memory_tb_s", 1e12, hi=1e3, lo_open=True),
        mem_bytes=num("memory_gb", 1e9, hi=1e6, lo_open=True),
        link_bw=num("interconnect_gb_s", 1e9, hi=1e6, lo_open=True),
        devices_per_node=f["devices_per_node"].integer(lo=1, hi=1024) if "devices_per_node" in f else None,
        eta_compute=num("eta_compute", 1.0, hi=1.0, lo_open=True),
        eta_memory=num("eta_memory", 1.0, hi=1.0, lo_open=True),
        launch_s=num("launch_us", 1e-6, hi=1e6),
        step_overhead_s=num("step_overhead_us", 1e-6, hi=1e9),
        seq_overhead_s=num("seq_overhead_us", 1e-6, hi=1e9),
        alloc_op_s=num("alloc_op_us", 1e-6, hi=1e6),
        op_s=num("op_us", 1e-6, hi=1e6),
        allreduce_latency_s=num("allreduce_latency_us", 1e-6, hi=1e6),
        gemm_half_rows=num("gemm_half_rows", 1.0, hi=1e6),
        eta_kv=num("eta_kv", 1.0, hi=1.0, lo_open=True),
        pass_overhead_s=num("pass_overhead_us", 1e-6, hi=1e9),
        index_check_s=num("index_check_us", 1e-6, hi=1e9),
        tree_row_s=num("tree_row_us", 1e-6, hi=1e9),
        gemm_rows=_gemm_rows(f["gemm_rows"]) if "gemm_rows" in f else None,
        gemm_rows_warm=_gemm_rows(f["gemm_rows_warm"]) if "gemm_rows_warm" in f else None,
        gemm_shapes=_gemm_shapes(f["gemm_shapes"]) if "gemm_shapes" in f else None,
        gemm_shapes_warm=_gemm_shapes(f["gemm_shapes_warm"]) if "gemm_shapes_warm" in f else None,
        cache_bytes=num("cache_mb", 2**20, hi=1e9),
        kv_sizes=_size_curve(f["kv_sizes"], 2**20, "MiB", 1.0, 1.0) if "kv_sizes" in f else None,
        kv_sizes_warm=_size_curve(f["kv_sizes_warm"], 2**20, "MiB", 1.0, 1.0) if "kv_sizes_warm" in f else None,
        kv_decode=_geometry_curves(f["kv_decode"]) if "kv_decode" in f else None,
        kv_decode_warm=_geometry_curves(f["kv_decode_warm"]) if "kv_decode_warm" in f else None,
        multi_query_s=num("multi_query_us", 1e-6, hi=1e9),
        batch_query_s=num("batch_query_us", 1e-6, hi=1e9),
        mixed_query_s=num("mixed_query_us", 1e-6, hi=1e9),
        draft_first_s=num("draft_first_us", 1e-6, hi=1e9),
        draft_seq_s=num("draft_seq_us", 1e-6, hi=1e9),
        draft_pass_s=num("draft_pass_us", 1e-6, hi=1e9),
        draft_pass_seq_s=num("draft_pass_seq_us", 1e-6, hi=1e9),
        draft_node_s=num("draft_node_us", 1e-6, hi=1e9),
        medusa_first_s=num("medusa_first_us", 1e-6, hi=1e9),
        medusa_seq_s=num("medusa_seq_us", 1e-6, hi=1e9),
        medusa_node_s=num("medusa_node_us", 1e-6, hi=1e9),
        draft_input_s=num("draft_input_us", 1e-6, hi=1e9),
        draft_input_row_s=num("draft_input_row_us", 1e-6, hi=1e9),
        ngram_call_s=num("ngram_call_us", 1e-6, hi=1e9),
        ngram_seq_s=num("ngram_seq_us", 1e-6, hi=1e9),
        eta_attn=num("eta_attn", 1.0, hi=1.0, lo_open=True),
        attn_dense=f["attn_dense"].boolean() if "attn_dense" in f else None,
        fused_query_s=num("fused_query_us", 1e-6, hi=1e6),
        fused_key_s=num("fused_key_ns", 1e-9, hi=1e6),
        fused_rows=_sized_curves(f["fused_rows"]) if "fused_rows" in f else None,
        fused_own=_sized_curves(f["fused_own"]) if "fused_own" in f else None,
        verify_seqs=_rows_curves(f["verify_seqs"]) if "verify_seqs" in f else None,
        elementwise_s=num("elementwise_ns", 1e-9, hi=1e6),
        elementwise_sizes=_size_curve(f["elementwise_sizes"], 1e6, "million elements", 1e-9, 1e6)
        if "elementwise_sizes" in f else None,
        logit_s=num("logit_ns", 1e-9, hi=1e6),
        draft_logit_s=num("draft_logit_ns", 1e-9, hi=1e6),
        draft_cand_s=num("draft_cand_us", 1e-6, hi=1e9),
        verify_call_s=num("verify_call_us", 1e-6, hi=1e9),
        tree_call_s=num("tree_call_us", 1e-6, hi=1e9),
        tree_node_s=num("tree_node_us", 1e-6, hi=1e9),
        pack_node_s=num("pack_node_us", 1e-6, hi=1e9),
        spec_step_s=num("spec_step_us", 1e-6, hi=1e9),
        spec_seq_s=num("spec_seq_us", 1e-6, hi=1e9),
        speed_rates=_speed_rates(f["speed_rates"]) if "speed_rates" in f else None,
        speed_spell_s=num("speed_spell_ms", 1e-3, hi=1e9),
        speed_drift_rates=_speed_rates(f["speed_drift_rates"]) if "speed_drift_rates" in f else None,
        speed_drift_s=num("speed_drift_ms", 1e-3, hi=1e9),
        gemm_reuse=_factor_rows(f["gemm_reuse"], 3) if "gemm_reuse" in f else None,
        gemm_step=_factor_rows(f["gemm_step"], 2) if "gemm_step" in f else None,
    )
    if "gemm_verify" in f:  # 0.42.0's profiles wrote it; checked, no longer priced (README 0.43.0)
        _factor_rows(f["gemm_verify"], 2)
    defaults = {f.name: f.default for f in fields(HardwareSpec) if f.default is not MISSING}  # the optional fields
    defaults |= dict(link_bw=1e10, devices_per_node=1, eta_compute=0.7, eta_memory=0.85, launch_s=0.0,
                     step_overhead_s=0.0, seq_overhead_s=0.0, alloc_op_s=0.0, allreduce_latency_s=0.0)
    if spec["draft_pass_seq_s"] is None and spec["draft_seq_s"] is not None:  # every pass alike (before 0.14.0)
        spec["draft_pass_seq_s"] = spec["draft_seq_s"]
    for key, value in list(spec.items()):
        if value is None:
            spec[key] = merged.get(key, defaults.get(key))
    for key in ("gemm_shapes", "gemm_shapes_warm"):
        if spec[key] and not spec["gemm_rows"]:
            raise (f[key] if key in f else node).error(
                "needs `gemm_rows` beside it (the curves by size that price the other matrices)")
    # (a warm shape table stands alone: a model whose weights fit the cache is priced on it alone,
    # so the calibration times its shapes warm only; a shape without a cold curve then prices on
    # its size's, gemm_rows, where the weights are read from memory)
    for warm, cold, what in (("gemm_rows_warm", "gemm_rows", "weights"), ("gemm_shapes_warm", None, None),
                             ("kv_sizes_warm", "kv_sizes", "K and V"), ("kv_decode_warm", None, None)):
        at = f[warm] if warm in f else node
        if spec[warm] and cold and not spec[cold]:
            raise at.error(f"needs `{cold}` beside it (the curve for {what} read from memory)")
        if spec[warm] and not spec["cache_bytes"]:
            raise at.error("needs `cache_mb` beside it (the last-level cache the warm curve fits in)")
    return HardwareSpec(**spec)


def _factor_rows(node: Node, factors: int) -> tuple:
    """A table of factors by rows (`gemm_reuse: [[rows, first, later_layer, later_lm], ...]`,
    `gemm_step: [[rows, layers, lm_head], ...]`): `factors` a row, rows ascending, factors positive."""
    items = node.seq(min_len=1, max_len=64)
    out = []
    for item in items:
        row = item.seq(min_len=1 + factors, max_len=1 + factors)
        rows = row[0].number(lo=1, hi=1e6)
        if out and rows <= out[-1][0]:
            raise row[0].error(f"rows must ascend: {rows:g} follows {out[-1][0]:g}")
        out.append((rows, *(x.number(lo=0, lo_open=True, hi=100) for x in row[1:])))
    return tuple(out)


def _speed_rates(node: Node) -> tuple:
    """`speed_rates: [r0, ..., rn]`: quantiles of a spell's rate, ascending, not all zero."""
    items = node.seq(min_len=2, max_len=1001)
    rates = tuple(item.number(lo=0.0, hi=1e6) for item in items)
    for k in range(1, len(rates)):
        if rates[k] < rates[k - 1]:
            raise items[k].error(f"quantiles must not descend: {rates[k]:g} follows {rates[k - 1]:g}")
    if rates[-1] <= 0:
        raise node.error("expected some positive rate (the quantiles are scaled to mean 1)")
    return rates


def _size_curve(node: Node, size_unit: float, size_name: str, value_unit: float, hi: float, zero: bool = False) -> tuple:
    """`[[size, value], ...]` (kv_sizes: MiB and eta_kv; elementwise_sizes: million elements and
    ns; fused_rows: rows and ns): sizes ascending, values positive (or 0 where `zero`) and at most
    `hi`; in SI units (x size_unit, value_unit)."""
    out: list = []
    for item in node.seq(min_len=1):
        pair = item.seq(min_len=2, max_len=2)
        size, value = pair[0].number(lo=0, lo_open=True, hi=1e9), pair[1].number(lo=0, lo_open=not zero, hi=hi)
        if out and size * size_unit <= out[-1][0]:
            raise pair[0].error(f"sizes must ascend: {size:g} {size_name} follows {out[-1][0] / size_unit:g}")
        out.append((size * size_unit, value * value_unit))
    return tuple(out)


def _gemm_rows_dict(table: tuple) -> dict:
    """A gemm_rows table in its profile form, {KiB: [[rows, fraction], ...]}."""
    return {int(b) // 1024: [list(p) for p in c] for b, c in table}


def geometry_label(geometry: tuple[int, int, int]) -> str:
    """An attention geometry as profiles key it (kv_decode): "KVxGxD" (KV heads, query heads per
    KV head, head_dim)."""
    return "x".join(str(n) for n in geometry)


def _geometry_curves(node: Node) -> tuple:
    """`kv_decode: {"KVxGxD": [[MiB, eta], ...], ...}`: KV heads, query heads per KV head and
    head_dim, positive integers, each a kv_sizes-like curve."""
    if not isinstance(node.value, dict) or not node.value:
        raise node.error('expected a mapping of attention geometries "KVxGxD" to [[MiB, eta], ...] curves')
    out = []
    for key in node.value:
        m = re.fullmatch(r"\s*(\d+)\s*x\s*(\d+)\s*x\s*(\d+)\s*", key) if isinstance(key, str) else None
        if m is None or not all(int(x) for x in m.groups()):
            raise node.error('expected attention geometries "KVxGxD" (KV heads, query heads per KV head, head_dim; '
                             f'positive) as keys, got {key!r}')
        out.append((tuple(int(x) for x in m.groups()), _size_curve(node.child(key), 2**20, "MiB", 1.0, 1.0)))
    return tuple(sorted(out))


def _sized_curves(node: Node) -> tuple:
    """`fused_rows` or `fused_own: {MiB: [[rows, ns], ...], ...}`: sizes positive, each a curve of rows
    ascending and ns at least 0; in bytes, rows and seconds, sizes ascending."""
    if not isinstance(node.value, dict) or not node.value:
        raise node.error("expected a mapping of sizes in MiB to [[rows, ns], ...] curves")
    out = []
    for key in node.value:
        if isinstance(key, bool) or not isinstance(key, (int, float)) or not 0 < key < 1e9:
            raise node.error(f"expected sizes in MiB (positive numbers) as keys, got {key!r}")
        out.append((key * 2**20, _size_curve(node.child(key), 1.0, "rows", 1e-9, 1e6, zero=True)))
    return tuple(sorted(out))


def _rows_curves(node: Node) -> tuple:
    """`verify_seqs: {rows: [[sequences, us], ...], ...}`: query rows integers of at least 2, each
    a curve of sequences ascending and us at least 0; in rows, sequences and seconds, rows
    ascending."""
    if not isinstance(node.value, dict) or not node.value:
        raise node.error("expected a mapping of query rows to [[sequences, us], ...] curves")
    out = []
    for key in node.value:
        if isinstance(key, bool) or not isinstance(key, int) or not 2 <= key <= 1 << 20:
            raise node.error(f"expected query rows (integers of at least 2) as keys, got {key!r}")
        out.append((key, _size_curve(node.child(key), 1.0, "sequences", 1e-6, 1e6, zero=True)))
    return tuple(sorted(out))


def _gemm_shapes_dict(table: tuple) -> dict:
    """A gemm_shapes table in its profile form, {"KxN": [[rows, fraction], ...]}."""
    return {f"{k}x{n}": [list(p) for p in c] for (k, n), c in table}


def _gemm_shapes(node: Node) -> tuple:
    """`gemm_shapes: {"KxN": [[rows, fraction], ...], ...}`: k and n positive integers, each
    curve's rows ascending, fractions positive."""
    if not isinstance(node.value, dict) or not node.value:
        raise node.error('expected a mapping of matrix shapes "KxN" to [[rows, fraction], ...] curves')
    out = []
    for key in node.value:
        m = re.fullmatch(r"\s*(\d+)\s*x\s*(\d+)\s*", key) if isinstance(key, str) else None
        if m is None or not int(m[1]) or not int(m[2]):
            raise node.error(f'expected matrix shapes "KxN" (k input and n output features, positive) as keys, got {key!r}')
        out.append(((int(m[1]), int(m[2])), _rows_curve(node.child(key))))
    return tuple(sorted(out))


def _rows_curve(node: Node) -> tuple:
    """`[[rows, fraction], ...]`: rows ascending positive integers, fractions positive (above 1
    where a product beats the square-GEMM peak)."""
    curve: list = []
    for item in node.seq(min_len=1):
        pair = item.seq(min_len=2, max_len=2)
        rows, frac = pair[0].integer(lo=1, hi=1 << 20), pair[1].number(lo=0, lo_open=True, hi=100.0)
        if curve and rows <= curve[-1][0]:
            raise pair[0].error(f"rows must ascend: {rows} follows {curve[-1][0]}")
        curve.append((rows, frac))
    return tuple(curve)


def _gemm_rows(node: Node) -> tuple:
    """`gemm_rows: {weight_kib: [[rows, fraction], ...], ...}`: rows ascending and the same in
    every curve, fractions positive (above 1 where a product beats the square-GEMM peak)."""
    if not isinstance(node.value, dict) or not node.value:
        raise node.error("expected a mapping of weight KiB to [[rows, fraction], ...] curves")
    out = []
    for key in sorted(node.value, key=lambda k: k if isinstance(k, int) else 0):
        if not isinstance(key, int) or isinstance(key, bool) or key < 1:
            raise node.error(f"expected weight sizes in KiB (positive integers) as keys, got {key!r}")
        curve = _rows_curve(node.child(key))
        if out and [r for r, _ in curve] != [r for r, _ in out[0][1]]:
            raise node.child(key).error("every curve must be measured at the same rows")
        out.append((key * 1024, tuple(curve)))
    return tuple(out)
