"""The hardware profile that validation.calibrate's figures make: the YAML the simulator reads
(sim.hardware), with a header that says what was measured and how."""
from __future__ import annotations

import os
import time

import torch

from sim.cost import KERNELS_PER_LAYER
from validation.host_probes import SPEED_BLOCK_S
from validation.probes import KV_MIDDLE


def profile_yaml(m: dict, name: str, memory_gb: float, note: str) -> str:
    """The profile YAML of figures `m` (Calibration.figures) for a device called `name` with
    `memory_gb` of memory, its header noting how it was measured (`note`)."""
    fp32 = m["flops_fp32"] / 1e12
    peak_bw = max(m["copy_bw"], m["stream_bw"])
    bf16 = m.get("flops_bf16", m["flops_fp32"]) / 1e12
    return f"""# Measured by `python -m validation.calibrate` ({note}, {m['rounds']} rounds).
# copy bandwidth {m['copy_bw'] / 1e9:.2f} GB/s (2 x size / time); weight streaming {m['stream_bw'] / 1e9:.2f} GB/s;
# fp32 GEMM {fp32 * 1e3:.1f} GFLOP/s; one-element op {m['launch_s'] * 1e6:.1f} us; engine host time
# {m['layer_s'] * 1e6:.0f} us per layer {_layer_note(m)} ({m['probe_layer_s'] * 1e6:.0f} us a hidden-64 layer), {m['step_s'] * 1e6:.0f} us per step, {m['seq_s'] * 1e6:.1f} us per sequence,
# {m['pass_s'] * 1e6:.0f} us per forward pass beyond its layers and LM head ({m['index_check_s'] * 1e6:.0f} us more to check its indices),
# {m['tree_row_s'] * 1e6:.0f} us more per layer where a drafter's single query rows are tree nodes,
# {m['multi_query_s'] * 1e6:.0f} us more per layer to verify
# ({m['batch_query_s'] * 1e6:.0f} us more where several sequences verify, {m['mixed_query_s'] * 1e6:.0f} us more
# where others beside them decode),
# drafters' host work around their passes: a step's first {m['draft_first_s'] * 1e6:.0f} us and {m['draft_seq_s'] * 1e6:.0f} us per sequence,
# each later one {m['draft_pass_s'] * 1e6:.0f} us and {m['draft_pass_seq_s'] * 1e6:.0f} us per sequence,
# {m['draft_node_s'] * 1e6:.1f} us per further node a tree level expands{_medusa_note(m)};
# prompt lookup {m['ngram_call_s'] * 1e6:.0f} us per step and {m['ngram_seq_s'] * 1e6:.1f} us per sequence;
# allocator op {m['alloc_op_s'] * 1e6:.2f} us; matmul half-rate rows {m['gemm_half_rows']:.1f};
# paged-attention KV gather {m['kv_gather_bw'] / 1e9:.2f} GB/s{f" ({m['kv_sizes'][-1][1] * m['stream_bw'] / 1e9:.2f} GB/s over {m['kv_sizes'][-1][0]:.0f} MiB)" if m.get('kv_sizes') else ''}{f", {m['kv_sizes_warm'][KV_MIDDLE][1] * m['stream_bw'] / 1e9:.2f} GB/s from the last-level cache" if m.get('kv_sizes_warm') else ''}; attention products
# of sequences with several query tokens at {m['eta_attn'] * fp32 * 1e3:.1f} GFLOP/s{' after the gather' if m['attn_dense'] else ''}, {m['fused_query_s'] * 1e6:.2f} us
# per query head and {m['fused_key_s'] * 1e9:.1f} ns per key and query head (by query rows and size, up to the group call's 64 rows, where
# fused_rows is measured; a sequence's own call on fused_own; in place, verify_seqs more a sequence of a group call); elementwise passes
# {m['elementwise_s'] * 1e9:.2f} ns per activation element; verification {m['logit_s'] * 1e9:.2f} ns per logit element,
# {m['verify_call_s'] * 1e6:.0f} us per call ({m['tree_call_s'] * 1e6:.0f} us more for a tree, {m['tree_node_s'] * 1e6:.2f} us per
# tree node), {m['pack_node_s'] * 1e6:.2f} us per drafted node packed, a speculative step {m['spec_step_s'] * 1e6:.0f} us and
# {m['spec_seq_s'] * 1e6:.1f} us per drafted sequence more than a decode{_spec_note(m)}; a drafter's selection {m['draft_logit_s'] * 1e9:.2f} ns
# per logit element, {m['draft_cand_s'] * 1e6:.2f} us per candidate of a dynamic tree;
# speed over {SPEED_BLOCK_S * 1e3:.0f} ms blocks: quantiles of the rate over its window's mean below, spells of
# {m['speed_spell_s'] * 1e3:.0f} ms; the windows' mean rates drift in spells of {m['speed_drift_s']:.1f} s.
# {_context_note(m.get('context'))}
description: {name} (measured)
tflops: {{fp32: {fp32:.5f}, bf16: {bf16:.5f}}}
memory_tb_s: {peak_bw / 1e12:.6f}
memory_gb: {memory_gb:.0f}
interconnect_gb_s: 10
devices_per_node: 1
eta_compute: 1.0
eta_memory: {m['stream_bw'] / peak_bw:.4f}
launch_us: {m['layer_s'] / KERNELS_PER_LAYER * 1e6:.2f}
step_overhead_us: {m['step_s'] * 1e6:.1f}
seq_overhead_us: {m['seq_s'] * 1e6:.2f}
alloc_op_us: {m['alloc_op_s'] * 1e6:.3f}
op_us: {m['launch_s'] * 1e6:.2f}
allreduce_latency_us: 0
gemm_half_rows: {m['gemm_half_rows']:.2f}
eta_kv: {min(1.0, m['kv_gather_bw'] / m['stream_bw']):.4f}
{('kv_sizes: ' + str(m['kv_sizes'])) if m.get('kv_sizes') else '# kv_sizes: none measured (eta_kv at every size)'}
{('kv_sizes_warm: ' + str(m['kv_sizes_warm'])) if m.get('kv_sizes_warm') else '# kv_sizes_warm: none measured'}
{('kv_decode: ' + str(m['kv_decode'])) if m.get('kv_decode') else '# kv_decode: none measured (decoding sequences on kv_sizes)'}
{('kv_decode_warm: ' + str(m['kv_decode_warm'])) if m.get('kv_decode_warm') else '# kv_decode_warm: none measured'}
eta_attn: {m['eta_attn']:.4f}
fused_query_us: {m['fused_query_s'] * 1e6:.3f}
fused_key_ns: {m['fused_key_s'] * 1e9:.3f}
{('fused_rows: ' + str(m['fused_rows'])) if m.get('fused_rows') else '# fused_rows: none measured (fused_key_ns at every query rows)'}
{('fused_own: ' + str(m['fused_own'])) if m.get('fused_own') else '# fused_own: none measured (calls of their own priced with the others)'}
{('verify_seqs: ' + str(m['verify_seqs'])) if m.get('verify_seqs') else '# verify_seqs: none measured (verifying sequences in place priced as the probes time them)'}
elementwise_ns: {m['elementwise_s'] * 1e9:.4f}
{('elementwise_sizes: ' + str(m['elementwise_sizes'])) if m.get('elementwise_sizes') else '# elementwise_sizes: none measured (elementwise_ns at every size)'}
logit_ns: {m['logit_s'] * 1e9:.4f}
verify_call_us: {m['verify_call_s'] * 1e6:.1f}
tree_call_us: {m['tree_call_s'] * 1e6:.1f}
tree_node_us: {m['tree_node_s'] * 1e6:.3f}
pack_node_us: {m['pack_node_s'] * 1e6:.3f}
spec_step_us: {m['spec_step_s'] * 1e6:.1f}
spec_seq_us: {m['spec_seq_s'] * 1e6:.2f}
draft_logit_ns: {m['draft_logit_s'] * 1e9:.4f}
draft_cand_us: {m['draft_cand_s'] * 1e6:.3f}
speed_spell_ms: {m['speed_spell_s'] * 1e3:.1f}
{('speed_rates: ' + str(list(m['speed_rates']))) if m['speed_rates'] else '# speed_rates: none measured (a constant speed)'}
speed_drift_ms: {m['speed_drift_s'] * 1e3:.1f}
{('speed_drift_rates: ' + str(list(m['speed_drift_rates']))) if m['speed_drift_rates'] else '# speed_drift_rates: none measured'}
attn_dense: {'true' if m['attn_dense'] else 'false'}
pass_overhead_us: {m['pass_s'] * 1e6:.1f}
index_check_us: {m['index_check_s'] * 1e6:.1f}
tree_row_us: {m['tree_row_s'] * 1e6:.1f}
multi_query_us: {m['multi_query_s'] * 1e6:.1f}
batch_query_us: {m['batch_query_s'] * 1e6:.1f}
mixed_query_us: {m['mixed_query_s'] * 1e6:.1f}
draft_first_us: {m['draft_first_s'] * 1e6:.1f}
draft_seq_us: {m['draft_seq_s'] * 1e6:.1f}
draft_pass_us: {m['draft_pass_s'] * 1e6:.1f}
draft_pass_seq_us: {m['draft_pass_seq_s'] * 1e6:.1f}
draft_node_us: {m['draft_node_s'] * 1e6:.2f}
{_medusa_yaml(m)}
ngram_call_us: {m['ngram_call_s'] * 1e6:.1f}
ngram_seq_us: {m['ngram_seq_s'] * 1e6:.2f}
{_reuse_yaml(m.get('gemm_reuse'))}
{_step_yaml(m.get('gemm_step'))}
{_input_yaml(m)}
""" + _gemm_rows_yaml("gemm_rows", m.get("gemm_rows"), "weights read from memory") \
        + _gemm_rows_yaml("gemm_rows_warm", m.get("gemm_rows_warm"),
                          f"weights in the last-level cache, passes {m.get('warm_gap_s', 0) * 1e3:g} ms apart") \
        + _gemm_rows_yaml("gemm_shapes", m.get("gemm_shapes"), "weights read from memory", "matrix shape (k x n)") \
        + _gemm_rows_yaml("gemm_shapes_warm", m.get("gemm_shapes_warm"), "weights in the last-level cache",
                          "matrix shape (k x n)") \
        + (f"cache_mb: {m['cache_bytes'] / 2**20:g}  # the last-level cache\n" if m.get("cache_bytes") else "")


def _reuse_yaml(rows) -> str:
    """The profile's gemm_reuse line (validation.reuse), or a comment where none was measured."""
    if not rows:
        return "# gemm_reuse: none measured (a drafter's products at the warm curves' price)"
    return ("# products used again within a step, timed in the engine, over the warm curves' price (validation.reuse):\n"
            "# rows, the first drafter pass's LM head shared with the target, the later passes' layer and LM head\n"
            f"gemm_reuse: {[list(r) for r in rows]}")


def _step_yaml(rows) -> str:
    """The profile's gemm_step line (validation.reuse), or a comment where none was measured."""
    if not rows:
        return "# gemm_step: none measured (the target's products at the warm curves' price)"
    return ("# the target's products in a step of plain decoding, timed in the engine, over the warm curves' price\n"
            "# (validation.reuse): rows, its layers' products, its LM head's\n"
            f"gemm_step: {[list(r) for r in rows]}")


def _input_yaml(m: dict) -> str:
    """The profile's fused-input lines (validation.reuse.input_line), or a comment where they were not measured."""
    if "draft_input_s" not in m:
        return "# draft_input_us: none measured (a fused input priced as its product and a launch)"
    return ("# an EAGLE head's or MTP module's fused input beyond its product, timed in the engine (validation.reuse)\n"
            f"draft_input_us: {m['draft_input_s'] * 1e6:.1f}\n"
            f"draft_input_row_us: {m['draft_input_row_s'] * 1e6:.3f}")


def _context_note(context) -> str:
    """The profile's line on the memory traffic its host-time probes ran amid (validation.traffic)."""
    if not context:
        return "host-time probes on their tiny models alone (no model's memory traffic around them)"
    name, target, drafter = context
    return (f"host-time probes amid the memory traffic of model {name}: {target / 2**20:.1f} MiB read after a "
            f"target pass, {drafter / 2**20:.1f} MiB after a drafter pass")


def _gemm_rows_yaml(key: str, table: dict | None, what: str, per: str = "weight-matrix size in KiB") -> str:
    if not table:
        return ""
    lines = [f"# matmul rate over M rows, fraction of the fp32 GEMM peak, per {per} ({what}):"]
    lines += [f"{key}:"] + [f"  {size}: {curve}" for size, curve in table.items()]
    return "\n".join(lines) + "\n"


def write_profile(m: dict, size_mb: int) -> str:
    """The profile YAML of figures `m` measured on this machine with `size_mb` MB probes."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    name = torch.cuda.get_device_name() if device == "cuda" else f"{os.cpu_count()}-core CPU"
    mem = (torch.cuda.get_device_properties(0).total_memory if device == "cuda"
           else os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")) / 1e9
    note = f"{time.strftime('%Y-%m-%d')}, {torch.get_num_threads()} threads, {size_mb} MB probes"
    return profile_yaml(m, name, mem, note)


def _medusa_yaml(m: dict) -> str:
    """Medusa's host fields where the calibration measured them (validation.drafter_host.medusa_probe)."""
    if "medusa_first_s" not in m:
        return ""
    return (f"medusa_first_us: {m['medusa_first_s'] * 1e6:.1f}\nmedusa_seq_us: {m['medusa_seq_s'] * 1e6:.1f}\n"
            f"medusa_node_us: {m['medusa_node_s'] * 1e6:.2f}")


def _medusa_note(m: dict) -> str:
    if "medusa_first_s" not in m:
        return ""
    return (f";\n# Medusa's host work around its heads' call {m['medusa_first_s'] * 1e6:.0f} us, {m['medusa_seq_s'] * 1e6:.0f} us per sequence"
            f" and {m['medusa_node_s'] * 1e6:.2f} us per sequence and further node")


def _spec_note(m: dict) -> str:
    """Where spec_step_s and spec_seq_s come from: the in-situ probe's chain steps' rest beyond
    its plain decoding steps', less their priced difference, by sequences
    (validation.reuse.spec_rest_figures); none where that probe did not run."""
    rows = m.get("spec_rows")
    if not rows:
        return " (not measured)"
    return (", timed in the engine's steps (by sequences, the excess of a step, us: "
            + ", ".join(f"{r}: {x * 1e6:.0f}" for r, x in rows) + ")")


def _layer_note(m: dict) -> str:
    """Where the profile's host time a layer (layer_s) comes from: the context model's later layer
    timed in its engine steps beyond the rest of its price (validation.reuse.layer_in_place), with
    that excess at every rows value timed, or the family-shaped layer probes."""
    rows = m.get("layer_rows")
    if not rows or "shape_layer_s" not in m:
        return "of the family's shape"
    by_rows = ", ".join(f"{r}: {x * 1e6:.0f} of {t * 1e6:.0f} over {k:.0f} keys" for r, x, t, k in rows)
    return (f"of the context model, timed in its engine steps beyond its priced products and attention\n"
            f"# (by sequences decoding, the excess of the layer as timed, us: {by_rows};\n"
            f"# the family-shaped layer probes' {m['shape_layer_s'] * 1e6:.0f} us)")
