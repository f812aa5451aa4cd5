"""validation.calibrate in its small CPU form: every probe measures something and the profile it
writes loads as a hardware spec whose figures are the measured ones."""
from pathlib import Path

import pytest

from sim.cost import KERNELS_PER_LAYER
from sim.hardware import hardware_from_node
from sim.specio import Node
from validation.calibrate import main, measure, profile_yaml

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_small_calibration_writes_a_loadable_profile(tmp_path):
    m = measure(size_mb=16, gemm_n=128, repeats=2)
    for key in ("copy_bw", "stream_bw", "flops_fp32", "launch_s", "layer_s", "probe_layer_s", "step_s", "seq_s",
                "alloc_op_s", "multi_query_s", "draft_seq_s", "pass_s", "index_check_s", "mixed_query_s",
                "batch_query_s", "fused_query_s", "fused_key_s"):
        assert m[key] >= 0, key
    assert m["rounds"] == 2
    assert 0 < m["eta_attn"] <= 1 and m["attn_dense"] is True and 1e-11 < m["elementwise_s"] < 1e-7
    # matmul curves at the small form's two sizes (32, 128 KiB) and rows 1, 4, 16: positive rates
    assert sorted(m["gemm_rows"]) == [32, 128]
    assert all([r for r, _ in c] == [1, 4, 16] and all(f > 0 for _, f in c) for c in m["gemm_rows"].values())
    assert 1e8 < m["copy_bw"] < 1e12 and 1e8 < m["flops_fp32"] < 1e13
    path = tmp_path / "cpu-measured.yaml"
    path.write_text(profile_yaml(m, "test CPU", 8, "test"))
    hw = hardware_from_node(Node(str(path), None, "hardware"), Path("."))
    assert hw.peak("fp32") == pytest.approx(m["flops_fp32"], rel=1e-3)
    assert hw.mem_bw * hw.eta_memory == pytest.approx(m["stream_bw"], rel=1e-3)
    assert hw.step_overhead_s == pytest.approx(m["step_s"], rel=1e-2, abs=1e-7)
    assert hw.draft_seq_s == pytest.approx(m["draft_seq_s"], rel=1e-2, abs=1e-7)
    assert hw.pass_overhead_s == pytest.approx(m["pass_s"], rel=1e-2, abs=1e-7)
    assert hw.index_check_s == pytest.approx(m["index_check_s"], rel=1e-2, abs=1e-7)
    assert hw.mixed_query_s == pytest.approx(m["mixed_query_s"], rel=1e-2, abs=1e-7)
    assert hw.eta_attn == pytest.approx(m["eta_attn"], abs=1e-4) and hw.attn_dense
    assert hw.fused_query_s == pytest.approx(m["fused_query_s"], rel=1e-2, abs=1e-9)
    assert hw.fused_key_s == pytest.approx(m["fused_key_s"], rel=1e-2, abs=1e-12)
    assert hw.launch_s == pytest.approx(m["layer_s"] / KERNELS_PER_LAYER, rel=1e-2)
    assert hw.elementwise_s == pytest.approx(m["elementwise_s"], rel=1e-3)
    assert 1e-12 < m["logit_s"] < 1e-7 and hw.logit_s == pytest.approx(m["logit_s"], rel=1e-3)
    assert 1e-12 < m["draft_logit_s"] < 1e-7 and hw.draft_logit_s == pytest.approx(m["draft_logit_s"], rel=1e-3)
    assert 1e-8 < m["draft_cand_s"] < 1e-3 and hw.draft_cand_s == pytest.approx(m["draft_cand_s"], rel=1e-2)
    # a verification call takes microseconds at least (a tree's more), packing a node some
    assert 1e-6 < m["verify_call_s"] < 1e-2 and 1e-8 < m["pack_node_s"] < 1e-3
    for key, field in (("verify_call_s", "verify_call_s"), ("tree_call_s", "tree_call_s"),
                       ("tree_node_s", "tree_node_s"), ("pack_node_s", "pack_node_s")):
        assert getattr(hw, field) == pytest.approx(m[key], rel=1e-2, abs=1e-8), key
    assert [b for b, _ in hw.gemm_rows] == [32 * 1024, 128 * 1024]
    assert hw.gemm_rows[0][1] == tuple((r, f) for r, f in m["gemm_rows"][32])


def test_cli_writes_where_asked(tmp_path, capsys):
    out = tmp_path / "x.yaml"
    assert main(["--out", str(out), "--size-mb", "8", "--gemm", "64", "--repeats", "1"]) == 0
    assert out.read_text().startswith("# Measured by")


def test_ticks_run_the_cycle_a_few_probes_at_a_time():
    """`tick` runs the next probes of the round-robin cycle (what runs between the measurements a
    profile predicts), `complete` finishes the cycle so every probe has as many calls."""
    from validation.calibrate import Calibration
    cal = Calibration(size_mb=8, gemm_n=64)
    order = list(cal.probes)
    cal.tick(3)
    assert [cal.calls[k] for k in order] == [1, 1, 1] + [0] * (len(order) - 3)
    assert set(cal.samples) == set(order[:3])  # single figures so far
    cal.complete()
    assert set(cal.calls.values()) == {1} and {len(v) for v in cal.samples.values()} == {1}
    cal.complete()  # a finished cycle stays as it is
    assert set(cal.calls.values()) == {1}
    cal.tick(len(order) + 2)  # wraps round: a second call of every probe, a third of the first two
    assert [cal.calls[k] for k in order[:3]] == [3, 3, 2]
    cal.complete()
    assert {len(v) for v in cal.samples.values()} == {3}
    assert cal.figures()["rounds"] == 3
    # paired probes give every figure of the pair from one call
    assert {"forward1", "forward6", "verifies6", "engine16", "mtp1", "logits1024", "attn64c1024", "layer6", "layermm1"} <= set(cal.samples)


def test_interleaved_times_alternate_the_calls():
    from validation.probes import interleaved_times
    log = []
    got = interleaved_times({"a": lambda: log.append("a"), "b": lambda: log.append("b")}, "cpu", 3)
    assert log == ["a", "b"] * 3 and set(got) == {"a", "b"} and all(t >= 0 for t in got.values())


def test_attention_figures_recover_the_rate_and_costs_they_were_built_from():
    """Probe times built from a known products rate over each sequence's queries x gathered keys,
    a cost per query head, a cost per key (its reading at the gather rate and more per query
    head) and a fixed cost per call give the rate and the two costs back."""
    from validation.probes import (ATTN_CONTEXTS, ATTN_FEW, ATTN_HEADS, ATTN_MANY, ATTN_SEQS, KV_DIM, KV_HEADS,
                                   attention_figures)
    peak, gather, eta, per_query, per_key = 100e9, 2e9, 0.3, 1.5e-6, 20e-9
    read = 2 * (KV_HEADS // 4) * KV_DIM * 4 / gather

    def times(query_s, key_s):
        def t(n, ctx):
            keys = ATTN_SEQS * (ctx + n)
            return 1e-3 + keys * (read + ATTN_HEADS * key_s) \
                + 4 * ATTN_HEADS * KV_DIM * ATTN_SEQS * n * (ctx + n) / (eta * peak) \
                + ATTN_SEQS * n * ATTN_HEADS * query_s
        return {f"attn{n}c{c}": t(n, c) for n in (ATTN_FEW, ATTN_MANY) for c in ATTN_CONTEXTS}

    assert attention_figures(times(per_query, per_key), gather, peak) == pytest.approx((eta, per_query, per_key))
    assert attention_figures(times(0.0, 0.0), gather, peak) == pytest.approx((eta, 0.0, 0.0), abs=1e-15)
    # the extra time no more than the extra reads: products are not what limits it
    flat = {k: 1e-3 for k in times(0.0, 0.0)}
    assert attention_figures(flat, gather, peak)[0] == 1.0


def test_logit_time_is_the_slope_over_the_vocabulary():
    """Probe times built from a fixed cost (the tree walk) and a cost per logit element give that
    cost back; no growth reads 0."""
    from validation.probes import LOGIT_NODES, LOGIT_SEQS, LOGIT_VOCABS, logit_probe, logit_time
    per, fixed = 2.5e-9, 4e-4
    t = [fixed + per * LOGIT_SEQS * (LOGIT_NODES + 1) * v for v in LOGIT_VOCABS]
    assert logit_time(*t) == pytest.approx(per)
    assert logit_time(1e-3, 9e-4) == 0.0
    tokens, n, path = logit_probe("cpu", 64)()  # the engine's own verification runs on it
    assert tokens.shape[0] == LOGIT_SEQS and all(1 <= k <= LOGIT_NODES + 1 for k in n.tolist())


def test_the_pass_overhead_probe_runs_its_passes_as_the_drafters_do():
    """pass_overhead_us is measured on a forward that skips the index checks, as every drafter's
    model does (index_check_us is the checked call's extra); the target checks."""
    from engine.drafting.heads import random_drafters
    from engine.model import Model
    from sim.models import ModelSpec
    from validation.probes import forward_probe

    def model_of(fn):
        return fn.__closure__[[c.cell_contents.__class__ for c in fn.__closure__].index(Model)].cell_contents

    assert model_of(forward_probe(1, "cpu", check=False)).ops is model_of(forward_probe(1, "cpu", check=False)).ops_unchecked
    checked = model_of(forward_probe(1, "cpu"))
    assert checked.ops is not checked.ops_unchecked
    spec = ModelSpec(name="t", layers=1, hidden=64, heads=4, kv_heads=2, head_dim=16, ffn=128, vocab=256,
                     bytes_per_weight=4, bytes_per_kv=4)
    target = Model.random(spec, seed=0)
    d = random_drafters(target, 1)
    for m in [d.draft, d.eagle.model, *(h.model for h in d.mtp)]:
        assert m.ops is m.ops_unchecked


def test_verify_host_figures_take_differences():
    """verify_host_figures: the chain call is the call price; the trees' difference per node; the
    small tree's call beyond its nodes and a chain call; packing per node over 4 x 62 nodes; the
    probes' own logits (2, 9, 63 rows of 64) come off first."""
    from validation.probes import VERIFY_SEQS, VERIFY_TREES, VERIFY_VOCAB, verify_host_figures
    small, large = VERIFY_TREES
    us = 1e-6
    t = {"vchain": 100 * us, f"vtree{small}": (100 + 50 + 2 * small) * us, f"vtree{large}": (100 + 50 + 2 * large) * us,
         "pack0": 80 * us, f"pack{large}": (80 + 1.5 * VERIFY_SEQS * large) * us}
    f = verify_host_figures(t, 0.0)
    assert f["verify_call_s"] == pytest.approx(100 * us) and f["tree_node_s"] == pytest.approx(2 * us)
    assert f["tree_call_s"] == pytest.approx(50 * us) and f["pack_node_s"] == pytest.approx(1.5 * us)
    logit = 1e-9  # the logits' share is taken off each call: the chain's 2 rows, the trees' rows
    g = verify_host_figures({k: v + logit * VERIFY_VOCAB * rows for k, v, rows in
                             ((k, v, {"vchain": 2, f"vtree{small}": small + 1, f"vtree{large}": large + 1}.get(k, 0))
                              for k, v in t.items())}, logit)
    assert all(g[k] == pytest.approx(f[k], rel=1e-9) for k in f)


def test_layer_probes_time_the_family_layer_and_its_products():
    """layer_probes: a forward of a model with the family's layers, and that model's own weight
    products at one row (four a layer); layer_time takes the forwards' difference per layer,
    less the products' (never negative)."""
    from validation.probes import EW_SPEC, layer_probes, layer_time
    calls = layer_probes(2, "cpu")
    assert set(calls) == {"layer2", "layermm2"}
    hidden, logits = calls["layer2"]()
    assert hidden.shape == (1, EW_SPEC.hidden) and logits.shape == (1, EW_SPEC.vocab)
    products = calls["layermm2"]()
    qkv = (EW_SPEC.heads + 2 * EW_SPEC.kv_heads) * EW_SPEC.head_dim
    assert len(products) == 2 and [tuple(p.shape) for p in products[0]] == [
        (1, qkv), (1, EW_SPEC.hidden), (1, 2 * EW_SPEC.ffn), (1, EW_SPEC.hidden)]
    host, mm = 300e-6, 200e-6  # a layer's host time and its products
    t = {"layer1": 1e-3 + host + mm, "layermm1": 50e-6 + mm, "layer6": 1e-3 + 6 * (host + mm), "layermm6": 50e-6 + 6 * mm}
    assert layer_time(t, 6) == pytest.approx(host, rel=1e-9)
    assert layer_time({"layer1": 1.0, "layermm1": 0.0, "layer6": 1.0, "layermm6": 1.0}, 6) == 0.0


def test_elementwise_time_is_the_slope_between_two_sizes():
    """elementwise_ns: the extra time per extra element between EW_TOKENS' two sizes, so each
    operation's fixed host time (charged per layer by launch_us) cancels; never negative."""
    from sim.cost import elementwise_elems
    from validation.probes import EW_SPEC, EW_TOKENS, elementwise_time
    per_tok = elementwise_elems(EW_SPEC)[0]
    fixed, ns = 220e-6, 0.8e-9
    small, large = (fixed + n * per_tok * ns for n in EW_TOKENS)
    assert elementwise_time(small, large) == pytest.approx(ns, rel=1e-9)
    assert elementwise_time(large, small) == 0.0


def test_draft_cand_time_per_extra_candidate():
    """draft_cand_us: the tree probe's extra time at top-8 over top-2 per extra candidate (4
    sequences of depth 6: 8 + 5 x 64 against 2 + 5 x 4 candidates each)."""
    from validation.probes import DRAFT_TREE_SEQS, draft_cand_time, draft_tree_candidates
    assert draft_tree_candidates(8, 6) == 328 and draft_tree_candidates(2, 6) == 22
    t2, t8 = 300e-6 + 2e-6 * DRAFT_TREE_SEQS * 22, 300e-6 + 2e-6 * DRAFT_TREE_SEQS * 328
    assert draft_cand_time(t2, t8) == pytest.approx(2e-6, rel=1e-9) and draft_cand_time(t8, t2) == 0.0
