"""The roofline cost model against hand-computed numbers (DESIGN.md §3)."""
from functools import partial
from pathlib import Path

import numpy as np
import pytest

from sim.cost import GROUP_MAX, ForwardCost, Work, alike_rows, attention_geometry, bound_of, expected_experts, host_time, several_rows
from sim.hardware import hardware_from_node
from sim.models import model_from_node
from sim.specio import Node


def model(name):
    return model_from_node(Node(name, None, "model"), Path("."))


def device(name, **override):
    if not override:
        return hardware_from_node(Node(name, None, "hardware"), Path("."))
    return hardware_from_node(Node({"preset": name, **override}, None, "hardware"), Path("."))


def round_trip(h, tmp_path):
    """A profile written by HardwareSpec.to_profile and read back."""
    import yaml
    p = tmp_path / "p.yaml"
    p.write_text(yaml.safe_dump(h.to_profile()))
    return hardware_from_node(Node(str(p), "t", "hardware"), Path("."))


IDEAL = dict(eta_compute=1.0, eta_memory=1.0, launch_us=0.0, step_overhead_us=0.0, seq_overhead_us=0.0)


def decode(batch, ctx):
    return Work(tokens=batch, seqs=batch, pairs=batch * (ctx + 1), kv_read=batch * (ctx + 1), lm_tokens=batch)


@pytest.mark.parametrize("name,published", [("llama-3.1-8b", 8.03e9), ("llama-3.1-70b", 70.6e9),
                                            ("llama-3.2-1b", 1.24e9), ("vicuna-7b", 6.74e9),
                                            ("vicuna-13b", 13.0e9), ("deepseek-v3", 671e9)])
def test_parameter_counts_match_published_totals(name, published):
    assert model(name).params_total == pytest.approx(published, rel=0.01)


def test_deepseek_v3_active_parameters_and_mla_kv():
    m = model("deepseek-v3")
    # 37B activated (arXiv:2412.19437); our count leaves out the 0.9B embedding table lookup
    assert m.params_active == pytest.approx(37e9, rel=0.03)
    assert m.kv_elems_per_token_layer == 512 + 64
    assert m.bytes_per_weight == 1 and m.mtp_modules == 1


def test_llama8b_batch1_on_h100_is_weights_over_bandwidth():
    """16 GB of bf16 weights over 3.35 TB/s. The 1.05 GB input-embedding table is gathered one row
    per token, not streamed, so a decode step reads 15.0 GB: 4.48 ms at ideal efficiency."""
    m, hw = model("llama-3.1-8b"), device("h100-sxm", **IDEAL)
    c = ForwardCost(m, hw)(decode(1, 0))
    assert m.params_total * 2 == pytest.approx(16.06e9, rel=0.001)
    streamed = (m.params_total - m.embed_params) * 2
    assert streamed == pytest.approx(15.01e9, rel=0.001)
    assert c.time == pytest.approx(streamed / 3.35e12, rel=0.01)  # activations + logits add < 1%
    assert bound_of(c.compute_time, c.memory_time) == "memory"
    # ~15 GFLOP per token against 989 TFLOP/s for ~4.8 ms: about 0.3% of peak
    util = c.flops / (c.time * 989.4e12)
    assert 0.002 < util < 0.004


def test_large_prefill_is_compute_bound():
    m, hw = model("llama-3.1-8b"), device("h100-sxm", **IDEAL)
    n = 8192
    c = ForwardCost(m, hw)(Work(tokens=n, seqs=1, pairs=n * (n + 1) // 2, kv_read=n, lm_tokens=1))
    linear = 2 * (m.params_active - m.head_params) * n
    attn = 4 * m.heads * m.head_dim * m.layers * n * (n + 1) / 2
    assert c.flops == pytest.approx(linear + attn + 2 * m.head_params, rel=1e-6)
    assert bound_of(c.compute_time, c.memory_time) == "compute"
    assert c.time == pytest.approx(c.flops / 989.4e12, rel=0.02)


def test_kv_reads_grow_with_context():
    m, hw = model("llama-3.1-8b"), device("h100-sxm", **IDEAL)
    f = ForwardCost(m, hw)
    short, long = f(decode(64, 100)), f(decode(64, 8000))
    kv_bytes = 64 * 7900 * m.kv_bytes_per_token  # 128 KiB per token for Llama-3.1-8B
    assert m.kv_bytes_per_token == 131072
    assert long.bytes - short.bytes == pytest.approx(kv_bytes, rel=1e-9)


def test_efficiency_and_overheads_scale_time():
    m = model("llama-3.1-8b")
    ideal = ForwardCost(m, device("h100-sxm", **IDEAL))(decode(1, 0)).time
    half = ForwardCost(m, device("h100-sxm", **{**IDEAL, "eta_memory": 0.5}))(decode(1, 0)).time
    assert half == pytest.approx(2 * ideal, rel=1e-9)
    launched = ForwardCost(m, device("h100-sxm", **{**IDEAL, "launch_us": 2.0}))(decode(1, 0)).time
    assert launched - ideal == pytest.approx(2e-6 * (32 * 10 + 2), rel=1e-9)
    hw = device("h100-sxm", **{**IDEAL, "step_overhead_us": 500.0, "seq_overhead_us": 10.0, "alloc_op_us": 1.0})
    assert host_time(hw, 8, alloc_ops=3) == pytest.approx(500e-6 + 80e-6 + 3e-6)


def test_moe_touches_expected_distinct_experts():
    assert expected_experts(256, 8, 1) == pytest.approx(8)
    assert expected_experts(256, 8, 10_000) == pytest.approx(256)
    # 2 tokens: 8 + 8·(1 − 8/256)
    assert expected_experts(256, 8, 2) == pytest.approx(8 + 8 * (1 - 8 / 256))
    m, hw = model("deepseek-v3"), device("h200", **IDEAL)
    f = ForwardCost(m, hw, tp=8)
    one, many = f(decode(1, 0)), f(decode(512, 0))
    # at batch 1 only the active experts stream; at batch 512 nearly all of them do
    assert one.bytes < 0.1 * m.weight_bytes / 8
    assert many.bytes > 0.9 * m.weight_bytes / 8


def test_tensor_parallel_splits_work_and_adds_allreduce():
    m = model("llama-3.1-70b")
    hw = device("h100-sxm", **IDEAL, allreduce_latency_us=5.0)
    t1 = ForwardCost(m, hw, tp=1)(decode(1, 0)).time
    t2 = ForwardCost(m, hw, tp=2)(decode(1, 0)).time
    allreduce = 80 * 2 * (2 * 1 / 2 * 8192 * 2 / 450e9 + 5e-6)
    assert t2 == pytest.approx(t1 / 2 + allreduce, rel=0.01)


def test_vectorised_and_scalar_pricing_agree():
    import numpy as np
    m, hw = model("llama-3.1-8b"), device("h100-sxm")
    f = ForwardCost(m, hw)
    ctx = np.arange(0, 5000, 500)
    vec = f(Work(tokens=32, seqs=32, pairs=32 * (ctx + 1), kv_read=32 * (ctx + 1), lm_tokens=32))
    for i, c in enumerate(ctx.tolist()):
        one = f(decode(32, c))
        assert vec.time[i] == pytest.approx(one.time, rel=1e-12)
        assert vec.bytes[i] == pytest.approx(one.bytes, rel=1e-12)


def test_hardware_profile_round_trips(tmp_path):
    """HardwareSpec.to_profile writes what hardware_from_node reads back (validation writes fitted profiles)."""
    root = Path(__file__).resolve().parents[1]
    h = hardware_from_node(Node("traces/hardware/cpu-measured.yaml", "t", "hardware"), root)
    h2 = round_trip(h, tmp_path)
    for k, v in h.to_dict().items():
        if isinstance(v, (int, float)):
            assert v == pytest.approx(h2.to_dict()[k], rel=1e-9), k
    assert h.flops == pytest.approx(h2.flops, rel=1e-9) and h.description == h2.description


CURVES = {768: [[1, 0.05], [4, 0.1], [16, 0.4]], 65536: [[1, 0.1], [4, 0.2], [16, 0.8]]}


def test_measured_matmul_curves_price_each_matrix():
    """With gemm_rows, each weight matrix computes at its size's fraction of the peak at that many
    rows: a matrix of exactly a measured size takes that curve, one between two sizes a curve in
    between (log size), rows interpolate linearly, and both hold beyond the measured ends."""
    import numpy as np
    from sim.cost import gemm_curve, weight_shapes
    table = tuple((kib * 1024, tuple(map(tuple, c))) for kib, c in CURVES.items())
    rows, frac = gemm_curve(table, 768 * 1024)
    assert rows.tolist() == [1, 4, 16] and frac.tolist() == pytest.approx([0.05, 0.1, 0.4])
    assert gemm_curve(table, 1.0)[1].tolist() == pytest.approx([0.05, 0.1, 0.4])       # held below
    assert gemm_curve(table, 1e12)[1].tolist() == pytest.approx([0.1, 0.2, 0.8])       # held above
    mid = gemm_curve(table, np.sqrt(768 * 65536) * 1024)[1]                             # halfway in log size
    assert mid.tolist() == pytest.approx([0.075, 0.15, 0.6])
    m = model("tiny")
    hw = device("cpu", gemm_rows=CURVES, launch_us=0.0, eta_compute=1.0)
    f = ForwardCost(m, hw)
    peak = hw.peak("fp32")
    params = [k * n for k, n in sum(weight_shapes(m, 1)[:2], [])]
    assert sum(params) == m.attn_params + m.dense_ffn_params
    for tokens in (1, 4, 10, 64):
        want = sum(2 * p * tokens / (peak * float(np.interp(tokens, *gemm_curve(table, p * m.bytes_per_weight))))
                   for p in params)
        assert f._compute(0.0, tokens, "dense") == pytest.approx(want, rel=1e-12)
    # 4 rows at twice the fraction of 1 row: the same compute time per matrix of the smallest size
    small = device("cpu", gemm_rows={768: [[1, 0.05], [4, 0.1]]}, launch_us=0.0)
    g = ForwardCost(m, small)
    assert g._compute(0.0, 4, "dense") == pytest.approx(2 * g._compute(0.0, 1, "dense"), rel=1e-12)


def test_shape_curves_price_their_shape_and_only_it():
    """gemm_shapes: a matrix of a measured (k, n) computes on that shape's curve; a matrix of the
    same size but another shape, and every other matrix, still on the size curves; where the
    model's weights fit the cache the warm shape curves price it (none measured there: the warm
    size curves); the profile form round-trips."""
    import numpy as np
    from sim.cost import gemm_curve, matrix_curve, row_efficiency, weight_shapes
    m = model("tiny")  # fp32: (256, 512) QKV, (256, 256) output, (256, 1536) gate-up, (768, 256) down
    base = dict(gemm_rows=CURVES, launch_us=0.0, eta_compute=1.0)
    plain = device("cpu", **base)
    shaped = device("cpu", **base, gemm_shapes={"768x256": [[1, 0.5], [16, 0.9]]})
    table = plain.gemm_rows
    rows, frac = matrix_curve(shaped, 768, 256, 4)
    assert rows.tolist() == [1, 16] and frac.tolist() == [0.5, 0.9]
    same_size = matrix_curve(shaped, 256, 768, 4)  # transposed: the size's blend
    assert same_size[1].tolist() == pytest.approx(gemm_curve(table, 768 * 256 * 4)[1].tolist())
    assert row_efficiency(shaped, 768 * 256 * 4, 4, (768, 256)) == pytest.approx(0.5 + 0.4 * 3 / 15)
    assert row_efficiency(shaped, 768 * 256 * 4, 4) == row_efficiency(plain, 768 * 256 * 4, 4)
    peak = plain.peak("fp32")
    for tokens in (1, 4, 64):
        down = 2 * 768 * 256 * tokens / peak
        was = down / float(np.interp(tokens, *gemm_curve(table, 768 * 256 * 4)))
        now = down / float(np.interp(tokens, [1, 16], [0.5, 0.9]))
        got = ForwardCost(m, shaped)._compute(0.0, tokens, "dense") - ForwardCost(m, plain)._compute(0.0, tokens, "dense")
        assert got == pytest.approx(now - was, rel=1e-9)
    assert (768, 256) in [kn for kns in weight_shapes(m, 1) for kn in kns]
    # warm: a resident model takes gemm_shapes_warm, or the warm size curves where none were measured
    warm = dict(gemm_rows_warm={768: [[1, 0.3], [4, 0.3], [16, 0.3]]}, cache_mb=64)
    both = device("cpu", **base, **warm, gemm_shapes={"768x256": [[1, 0.5]]}, gemm_shapes_warm={"768x256": [[1, 0.7]]})
    assert matrix_curve(both.for_weights(m.weight_bytes), 768, 256, 4)[1].tolist() == [0.7]
    assert matrix_curve(both, 768, 256, 4)[1].tolist() == [0.5]
    cold_only = device("cpu", **base, **warm, gemm_shapes={"768x256": [[1, 0.5]]})
    assert matrix_curve(cold_only.for_weights(m.weight_bytes), 768, 256, 4)[1].tolist() == [0.3, 0.3, 0.3]
    # a warm shape table alone (0.30.0: the calibration times a resident model's shapes warm only):
    # the resident model on it, a model read from memory on its size's cold curve
    warm_only = device("cpu", **base, **warm, gemm_shapes_warm={"768x256": [[1, 0.7]]})
    assert matrix_curve(warm_only.for_weights(m.weight_bytes), 768, 256, 4)[1].tolist() == [0.7]
    assert matrix_curve(warm_only, 768, 256, 4)[1].tolist() == matrix_curve(device("cpu", **base), 768, 256, 4)[1].tolist()
    import yaml
    back = device("cpu", **yaml.safe_load(yaml.safe_dump({k: v for k, v in both.to_profile().items()
                                                          if k.startswith(("gemm_", "cache"))})))
    assert back.gemm_shapes == both.gemm_shapes and back.gemm_shapes_warm == both.gemm_shapes_warm


@pytest.mark.parametrize("extra,msg", [({"gemm_shapes": {"768": [[1, 0.1]]}}, "KxN"),
                                       ({"gemm_shapes": {"0x5": [[1, 0.1]]}}, "positive"),
                                       ({"gemm_shapes": {"2x5": [[2, 0.1], [1, 0.1]]}}, "rows must ascend"),
                                       ({"gemm_shapes": [[1, 0.1]]}, "mapping"),
                                       ({"gemm_shapes": {"2x5": [[1, 0.1]]}, "gemm_shapes_warm": {"2x5": [[1, 0.1]]}},
                                        "cache_mb")])
def test_bad_shape_curves_are_rejected(extra, msg):
    from sim.errors import SpecError
    with pytest.raises(SpecError, match=msg):
        device("cpu", gemm_rows=CURVES, **extra)


def test_shape_curves_need_the_size_curves_beside_them():
    from sim.errors import SpecError
    with pytest.raises(SpecError, match="needs `gemm_rows` beside it"):
        device("cpu", gemm_shapes={"2x5": [[1, 0.1]]})


@pytest.mark.parametrize("bad,msg", [({768: [[4, 0.1], [1, 0.2]]}, "rows must ascend"),
                                     ({768: [[1, 0.1]], 4096: [[2, 0.1]]}, "same rows"),
                                     ({"big": [[1, 0.1]]}, "KiB"),
                                     ({768: [[1, 0.0]]}, "0"),
                                     ([[1, 0.1]], "mapping")])
def test_bad_matmul_curves_are_rejected(bad, msg):
    from sim.errors import SpecError
    with pytest.raises(SpecError, match=msg):
        device("cpu", gemm_rows=bad)


WARM = {768: [[1, 0.1], [4, 0.2], [16, 0.6]], 65536: [[1, 0.2], [4, 0.3], [16, 0.9]]}


def test_warm_curves_price_a_model_whose_weights_fit_the_cache(tmp_path):
    """With gemm_rows_warm and cache_mb, a trace whose model's weights (per device) fit the cache
    prices its products on the warm curves, one whose weights do not on gemm_rows; the report's
    hardware says which (resident_bytes: the weights, else 0). A profile without the warm curves, or a model just
    over the cache, is priced as before. Both round-trip through a profile."""
    from sim.spec import trace_from_node
    tiny, big = model("tiny"), model("llama-3.2-1b")
    cold = device("cpu", gemm_rows=CURVES, launch_us=0.0)
    both = device("cpu", gemm_rows=CURVES, gemm_rows_warm=WARM, cache_mb=300, launch_us=0.0)
    warm = device("cpu", gemm_rows=WARM, launch_us=0.0)
    assert both.matmul_rows == cold.gemm_rows and not both.resident_bytes
    assert tiny.weight_bytes < 300 * 2**20 < big.weight_bytes
    for m, like in ((tiny, warm), (big, cold)):
        got = ForwardCost(m, both.for_weights(m.weight_bytes))
        for tokens in (1, 4, 12):
            assert got._compute(0.0, tokens, "dense") == pytest.approx(ForwardCost(m, like)._compute(0.0, tokens, "dense"), rel=1e-12)
            assert got._compute(0.0, tokens, "lm") == pytest.approx(ForwardCost(m, like)._compute(0.0, tokens, "lm"), rel=1e-12)
    assert both.for_weights(300 * 2**20).resident_bytes == 300 * 2**20
    assert not both.for_weights(300 * 2**20 + 1).resident_bytes
    assert not cold.for_weights(tiny.weight_bytes).resident_bytes  # no warm curves: nothing changes
    back = round_trip(both, tmp_path)
    assert back.gemm_rows_warm == both.gemm_rows_warm and back.cache_bytes == 300 * 2**20
    trace = {"version": 1, "name": "t", "hardware": {"preset": "cpu", "gemm_rows": CURVES, "gemm_rows_warm": WARM, "cache_mb": 300},
             "workload": {"requests": 4, "arrival": {"process": "closed", "concurrency": 1},
                          "prompt_tokens": {"dist": "fixed", "value": 8}, "output_tokens": {"dist": "fixed", "value": 4}}}
    for m in (tiny, big):
        hw = trace_from_node(Node(trace | {"model": m.name}, "t.yaml", ""), Path("t.yaml")).hardware
        assert hw.resident_bytes == (m.weight_bytes if m is tiny else 0)


def test_cached_weights_are_not_streamed_at_the_memory_roof():
    """Where the warm curves price a model whose weights fit the cache, its products cost what
    those curves say (timed reading the weights from the cache) on a memory rate slow enough to
    bind every product of the same model on the cold curves, and of a model over the cache.
    Cost.bytes counts the weights either way."""
    tiny, big = model("tiny"), model("llama-3.2-1b")

    def hw(tb_s, **warm):
        return device("cpu", gemm_rows=CURVES, memory_tb_s=tb_s, launch_us=0.0, **warm)

    warm = dict(gemm_rows_warm=WARM, cache_mb=300)
    for tokens in (1, 4, 12):
        slow, fast = (ForwardCost(tiny, hw(tb, **warm).for_weights(tiny.weight_bytes))._token_part(tokens, tokens)
                      for tb in (0.003, 3.0))
        assert slow[0] == pytest.approx(fast[0], rel=0.02) and slow[2] == fast[2]  # time; bytes
        cold_slow, cold_fast = (ForwardCost(tiny, hw(tb))._token_part(tokens, tokens) for tb in (0.003, 3.0))
        assert cold_slow[0] > 3 * cold_fast[0] and cold_slow[0] > tiny.weight_bytes / 3e9 and cold_slow[2] == slow[2]
    over = hw(0.003, **warm).for_weights(big.weight_bytes)
    assert ForwardCost(big, over).weight_stream == 1.0
    assert ForwardCost(big, over)._token_part(1, 1)[0] > big.weight_bytes / 3e9


def test_warm_gathers_while_they_fit_beside_cached_weights(tmp_path):
    """With kv_sizes_warm, a model whose weights fit the cache reads a layer's gather at the warm
    rate while every layer's gather fits beside the weights, at kv_sizes beyond; a model whose
    weights do not fit reads kv_sizes at every size. It round-trips through a profile."""
    m = model("tiny")
    fields = dict(kv_sizes=[[8, 0.3], [128, 0.2]], kv_sizes_warm=[[8, 0.6], [128, 0.4]], cache_mb=64)
    hw = device("cpu", **fields).for_weights(m.weight_bytes)
    cold = device("cpu", kv_sizes=fields["kv_sizes"])
    warm = device("cpu", kv_sizes=fields["kv_sizes_warm"])
    room = (64 * 2**20 - m.weight_bytes) / m.layers
    assert hw.resident_bytes == m.weight_bytes and 8 * 2**20 < room < 16 * 2**20
    f, fc, fw = ForwardCost(m, hw), ForwardCost(m, cold), ForwardCost(m, warm)
    for b in (1e6, 8 * 2**20, room, room + 1, 64 * 2**20, 1e9):
        assert f.kv_time(b) == pytest.approx((fw if b <= room else fc).kv_time(b), rel=1e-12)
    import numpy as np
    sizes = np.array([1e6, room, room + 1, 1e9])
    assert f.kv_time(sizes).tolist() == pytest.approx([f.kv_time(float(b)) for b in sizes], rel=1e-12)
    big = model("llama-3.2-1b")
    assert ForwardCost(big, device("cpu", **fields).for_weights(big.weight_bytes)).kv_time(1e6) == \
        pytest.approx(ForwardCost(big, cold).kv_time(1e6), rel=1e-12)
    assert round_trip(device("cpu", **fields), tmp_path).kv_sizes_warm == ((8 * 2**20, 0.6), (128 * 2**20, 0.4))


@pytest.mark.parametrize("extra,msg", [({"gemm_rows_warm": WARM}, "cache_mb"),
                                       ({"kv_sizes_warm": [[8, 0.5]], "kv_sizes": [[8, 0.3]]}, "cache_mb"),
                                       ({"kv_sizes_warm": [[8, 0.5]], "cache_mb": 300}, "kv_sizes"),
                                       ({"gemm_rows_warm": WARM, "cache_mb": 300, "gemm_rows": None}, "gemm_rows"),
                                       ({"gemm_rows_warm": {768: [[4, 0.1], [1, 0.2]]}, "cache_mb": 300}, "ascend")])
def test_bad_warm_curves_are_rejected(extra, msg):
    from sim.errors import SpecError
    fields = {"gemm_rows": CURVES} | extra
    with pytest.raises(SpecError, match=msg) as e:
        device("cpu", **{k: v for k, v in fields.items() if v is not None})
    assert "_warm" in str(e.value)


def test_gather_rate_follows_the_measured_size_curve(tmp_path):
    """With kv_sizes, a layer's KV read of b bytes (every sequence's K and V in the pass) runs at
    the eta_kv measured for that size: exactly at a measured size, log-interpolated between,
    held beyond the ends; the rest of the step is unchanged. It round-trips through a profile."""
    import math
    m = model("llama-3.2-1b")
    flat = device("cpu", eta_kv=0.5)
    curved = device("cpu", eta_kv=0.5, kv_sizes=[[8, 0.5], [128, 0.25]])
    assert curved.kv_sizes == ((8 * 2**20, 0.5), (128 * 2**20, 0.25))
    base, cur = ForwardCost(m, flat), ForwardCost(m, curved)
    per_tok = base.kv_tok
    for batch, ctx in ((1, 100), (4, 2000), (16, 2000), (64, 4000)):
        w = decode(batch, ctx)
        b = per_tok * (w.kv_read + w.tokens)  # a layer's gathered bytes
        mib = b / 2**20
        eta = 0.5 if mib <= 8 else 0.25 if mib >= 128 else 0.5 + (0.25 - 0.5) * math.log(mib / 8) / math.log(16)
        want = m.layers * b / (base.bw * eta) - m.layers * b / (base.bw * 0.5)
        assert cur(w).time - base(w).time == pytest.approx(want, rel=1e-9, abs=1e-15)
    assert cur(decode(1, 100)).time == pytest.approx(base(decode(1, 100)).time, rel=1e-12)  # below the curve
    assert round_trip(curved, tmp_path).kv_sizes == curved.kv_sizes


def test_decoding_sequences_read_their_geometrys_decode_curve(tmp_path):
    """With kv_decode, a model of a measured geometry (KV heads, query heads per KV head,
    head_dim) reads its decoding sequences' share of a layer's gather on that curve, at the rate
    for the layer's whole gather, and the rest (sequences with several query tokens) on
    kv_sizes; a model of another geometry reads kv_sizes throughout. It round-trips through a
    profile, warm beside cached weights as kv_sizes_warm."""
    import math
    m = model("tiny")
    assert attention_geometry(m) == (2, 2, 64) and attention_geometry(model("llama-3.2-1b")) == (8, 4, 64)
    gen = dict(eta_kv=0.5, kv_sizes=[[8, 0.5], [128, 0.25]])
    plain, curved = device("cpu", **gen), device("cpu", **gen, kv_decode={"2x2x64": [[8, 0.2], [128, 0.1]]})
    base, cur = ForwardCost(m, plain), ForwardCost(m, curved)

    def eta(b, lo, hi):  # log-interpolated between 8 and 128 MiB, held beyond
        x = min(max(b / 2**20, 8), 128)
        return lo + (hi - lo) * math.log(x / 8) / math.log(16)

    for batch, ctx in ((1, 100), (4, 2000), (16, 2048), (64, 4000)):
        w = decode(batch, ctx)
        b = base.kv_tok * (w.kv_read + w.tokens)
        want = m.layers * (b / (base.bw * eta(b, 0.2, 0.1)) - b / (base.bw * eta(b, 0.5, 0.25)))
        assert cur(w).time - base(w).time == pytest.approx(want, rel=1e-9)
        # every sequence verifying 3 drafts: kv_sizes alone
        v = Work(tokens=4 * batch, seqs=batch, pairs=batch * 4 * (ctx + 4), kv_read=batch * (ctx + 4), lm_tokens=4 * batch,
                 multi_tokens=4 * batch, multi_kv=batch * (ctx + 4))
        assert cur(v).time == pytest.approx(base(v).time, rel=1e-12)
        # half of them: their bytes on kv_sizes, the decoding half's on kv_decode, both at the whole gather's size
        h = Work(tokens=batch // 2 * 4 + batch - batch // 2, seqs=batch, pairs=0, kv_read=batch // 2 * (ctx + 4)
                 + (batch - batch // 2) * (ctx + 1), lm_tokens=batch, mixed=1, multi_tokens=batch // 2 * 4,
                 multi_kv=batch // 2 * (ctx + 4))
        b = base.kv_tok * (h.kv_read + h.tokens)
        dec = base.kv_tok * (batch - batch // 2) * (ctx + 2)
        want = m.layers * (dec / (base.bw * eta(b, 0.2, 0.1)) - dec / (base.bw * eta(b, 0.5, 0.25)))
        assert cur(h).time - base(h).time == pytest.approx(want, rel=1e-9)
    other = model("llama-3.2-1b")
    assert ForwardCost(other, curved)(decode(4, 2000)).time == ForwardCost(other, plain)(decode(4, 2000)).time
    assert round_trip(curved, tmp_path).kv_decode == (((2, 2, 64), ((8 * 2**20, 0.2), (128 * 2**20, 0.1))),)
    # warm: while a layer's gather fits beside the cached weights
    warm = device("cpu", **gen, cache_mb=64, kv_decode={"2x2x64": [[8, 0.2], [128, 0.1]]},
                  kv_decode_warm={"2x2x64": [[8, 0.4], [128, 0.3]]})
    assert round_trip(warm, tmp_path).kv_decode_warm == (((2, 2, 64), ((8 * 2**20, 0.4), (128 * 2**20, 0.3))),)
    f = ForwardCost(m, warm.for_weights(m.weight_bytes))
    assert f.kv_time(2**20, 2**20) == pytest.approx(2**20 / (f.bw * 0.4), rel=1e-12)
    assert f.kv_time(2**30, 2**30) == pytest.approx(2**30 / (f.bw * 0.1), rel=1e-12)


@pytest.mark.parametrize("extra,msg", [({"kv_decode": {"2x2": [[8, 0.5]]}}, "KVxGxD"),
                                       ({"kv_decode": {"2x0x64": [[8, 0.5]]}}, "positive"),
                                       ({"kv_decode": [[8, 0.5]]}, "mapping"),
                                       ({"kv_decode": {"2x2x64": [[8, 1.5]]}}, "1"),
                                       ({"kv_decode_warm": {"2x2x64": [[8, 0.5]]}}, "cache_mb")])
def test_bad_decode_curves_are_rejected(extra, msg):
    from sim.errors import SpecError
    with pytest.raises(SpecError, match=msg) as e:
        device("cpu", **extra)
    assert "kv_decode" in str(e.value)


def test_elementwise_passes_follow_the_measured_size_curve(tmp_path):
    """With elementwise_sizes, a layer's passes over n = tokens x elementwise_elems elements cost n
    times the time per element measured for n (log-interpolated, held beyond the ends) instead
    of elementwise_ns; nothing else in the step changes. It round-trips through a profile."""
    import math
    from sim.cost import elementwise_elems
    m = model("tiny")
    el = elementwise_elems(m)[0]
    flat = device("cpu", elementwise_ns=0.0)
    curved = device("cpu", elementwise_ns=5.0, elementwise_sizes=[[1.0, 1.0], [16.0, 2.0]])
    base, cur = ForwardCost(m, flat), ForwardCost(m, curved)
    for tokens in (4, 256, 1024, 4096, 16384):
        w = Work(tokens=tokens, seqs=1, pairs=tokens * (tokens + 1) // 2, kv_read=0, lm_tokens=1)
        n = el * tokens
        ns = 1.0 if n <= 1e6 else 2.0 if n >= 16e6 else 1.0 + math.log(n / 1e6) / math.log(16)
        assert cur(w).time - base(w).time == pytest.approx(m.layers * n * ns * 1e-9, rel=1e-9)
    back = round_trip(curved, tmp_path).elementwise_sizes
    assert [a for a, _ in back] == pytest.approx([1e6, 16e6]) and [b for _, b in back] == pytest.approx([1e-9, 2e-9])


@pytest.mark.parametrize("field,bad,msg", [("kv_sizes", [[32, 0.5], [8, 0.4]], "ascend"), ("kv_sizes", [[8, 1.5]], "1"),
                                           ("kv_sizes", [[8, 0.0]], "0"), ("kv_sizes", [[8]], "2"),
                                           ("kv_sizes", {8: 0.5}, "list"),
                                           ("elementwise_sizes", [[4, 1.0], [4, 2.0]], "ascend"),
                                           ("elementwise_sizes", [[4, -1.0]], "0")])
def test_bad_size_curves_are_rejected(field, bad, msg):
    from sim.errors import SpecError
    with pytest.raises(SpecError, match=msg) as e:
        device("cpu", **{field: bad})
    assert field in str(e.value)


def test_multi_query_host_time_only_when_a_sequence_has_several_queries():
    m = model("tiny")
    base, extra = device("cpu"), device("cpu", multi_query_us=300.0)
    for w, several in ((decode(4, 100), False),
                       (Work(tokens=12, seqs=4, pairs=1200, kv_read=400, lm_tokens=12), True)):
        d = ForwardCost(m, extra)(w).time - ForwardCost(m, base)(w).time
        assert d == pytest.approx(m.layers * 300e-6 if several else 0.0, abs=1e-12)


def test_measured_curves_and_multi_query_round_trip(tmp_path):
    h = device("cpu", gemm_rows=CURVES, multi_query_us=250.0)
    h2 = round_trip(h, tmp_path)
    assert h2.gemm_rows == h.gemm_rows and h2.multi_query_s == pytest.approx(250e-6)


def test_drafter_host_time_per_sequence_per_pass(tmp_path):
    """draft_seq_us is charged once per sequence per drafter pass (compiled and direct pricing
    alike) and once per sequence for Medusa's single pass, where no draft_pass_seq_us is given;
    with one, the passes after the first pay it per sequence."""
    from sim.drafters import PassPricer, medusa_cost
    m = model("tiny")
    base, extra = device("cpu"), device("cpu", draft_seq_us=100.0)
    for n, passes in ((1, (1, 1, 1)), (4, (4, 8, 8))):
        for how in ("__call__", "direct"):
            d = getattr(PassPricer(m, extra, 1), how)(n, 500, passes).time - getattr(PassPricer(m, base, 1), how)(n, 500, passes).time
            assert d == pytest.approx(len(passes) * n * 100e-6, rel=1e-9), how
    d = medusa_cost(m, extra, 1, 4, 3).time - medusa_cost(m, base, 1, 4, 3).time
    assert d == pytest.approx(3 * 100e-6, rel=1e-9)
    # with draft_pass_seq_us the passes after a step's first pay that instead
    split = device("cpu", draft_seq_us=100.0, draft_pass_seq_us=30.0)
    assert split.draft_pass_seq_s == pytest.approx(30e-6) and extra.draft_pass_seq_s == pytest.approx(100e-6)
    for n, passes in ((1, (1, 1, 1)), (4, (4, 8, 8)), (3, (5,))):
        for how in ("__call__", "direct"):
            d = getattr(PassPricer(m, split, 1), how)(n, 500, passes).time - getattr(PassPricer(m, base, 1), how)(n, 500, passes).time
            assert d == pytest.approx(n * (100e-6 + (len(passes) - 1) * 30e-6), rel=1e-9), how
    assert round_trip(split, tmp_path).draft_pass_seq_s == pytest.approx(30e-6)


def test_mtp_modules_pay_a_first_pass_per_sequence_eagle_chains_do_not(tmp_path):
    """Each MTP module catches up its own entries (engine/drafting/mtp.py), so every pass of an
    MTP chain pays draft_seq_us a sequence; an EAGLE chain's passes after its root pay
    draft_pass_seq_us. Priced through each scheme's own drafter, on profiles that differ in
    draft_pass_seq_us alone and then in draft_seq_us alone."""
    from sim.trees import chain
    from tests.helpers import make_trace
    speculation = [{"scheme": "mtp", "depth": 3, "acceptance": {"per_depth": [0.5, 0.5, 0.5]}},
                   {"scheme": "eagle", "depth": 3, "acceptance": {"per_depth": [0.5, 0.5, 0.5]}}]

    def price(label, **hw):
        trace = make_trace(tmp_path, model="llama-3.2-1b", speculation=speculation,
                           hardware={"preset": "cpu", "draft_seq_us": 100.0, "draft_pass_seq_us": 30.0} | hw)
        scheme = next(s for s in trace.speculation if s.name == label)
        return scheme.drafter(trace)(4, 2000, 3, chain(3), 8, 0, 4).time  # 4 sequences, a 3-deep chain: 3 passes

    for label, later in (("mtp", 0.0), ("eagle", 2 * 4 * 50e-6)):  # 2 later passes x 4 sequences
        assert price(label, draft_pass_seq_us=80.0) - price(label) == pytest.approx(later, abs=1e-12), label
    assert price("mtp", draft_seq_us=150.0) - price("mtp") == pytest.approx(3 * 4 * 50e-6, rel=1e-9)
    assert price("eagle", draft_seq_us=150.0) - price("eagle") == pytest.approx(4 * 50e-6, rel=1e-9)


def test_drafter_node_time_per_further_row_of_a_tree_level(tmp_path):
    """draft_node_us is charged per row of a later pass beyond one per sequence, where the later
    passes are tree levels (EAGLE's), compiled and direct pricing alike; never for a chain, the
    first pass, or passes whose extra rows are catch-up entries (tree_levels off: MTP, draft model)."""
    from sim.drafters import PassPricer
    m = model("tiny")
    base, node = device("cpu"), device("cpu", draft_node_us=20.0)
    assert round_trip(node, tmp_path).draft_node_s == pytest.approx(20e-6)
    for n, passes, further in ((1, (1, 1, 1), 0), (4, ((9, 4), 4, 4), 0), (4, ((9, 4), 8, 12, 4), 4 + 8), (2, ((2, 2), 6), 4)):
        for how in ("__call__", "direct"):
            price = lambda hw, levels: getattr(PassPricer(m, hw, 1, tree_levels=levels), how)(n, 500, passes).time  # noqa: E731
            assert price(node, True) - price(base, True) == pytest.approx(further * 20e-6, rel=1e-9, abs=1e-12), how
            assert price(node, False) == pytest.approx(price(base, False), rel=1e-12), how


def test_tree_row_time_per_layer_of_a_later_pass_of_single_node_rows(tmp_path):
    """tree_row_us is charged per layer of each later pass in which some sequence has one query
    row (a chain's next node), compiled and direct pricing alike; never for the first pass, a
    tree level whose every sequence has several rows (the verification's paths), or a catch-up
    drafter's passes (MTP's); it round-trips."""
    from sim.drafters import PassPricer
    m = model("tiny")
    base, rows = device("cpu"), device("cpu", tree_row_us=40.0)
    assert round_trip(rows, tmp_path).tree_row_s == pytest.approx(40e-6)
    for n, passes, charged in ((1, (1, 1, 1), 2), (4, ((9, 4), 4, 4), 2), (4, ((9, 4), 8, 12), 0),
                               (4, ((9, 4), (6, 6, 2)), 1), (3, (5,), 0)):
        for how in ("__call__", "direct"):
            for catch_up in (False, True):
                price = lambda hw: getattr(PassPricer(m, hw, 1, catch_up=catch_up), how)(n, 500, passes).time  # noqa: E731
                want = 0.0 if catch_up else charged * m.layers * 40e-6
                assert price(rows) - price(base) == pytest.approx(want, rel=1e-9, abs=1e-12), (n, passes, how, catch_up)


def test_medusa_heads_read_their_lm_heads_once_and_pay_no_forward_overhead():
    """Own LM heads (Medusa §2.1.1): K matrices of h x V read; shared: the target's one matrix for
    all K x n rows (same FLOPs). The heads' call is not a forward pass: pass_overhead_us adds
    nothing, its launches do (two products and MEDUSA_OPS more)."""
    from sim.drafters import MEDUSA_OPS, medusa_cost
    m = model("llama-3.1-8b")
    hw = device("h100-sxm")
    own, shared = medusa_cost(m, hw, 1, 4, 2), medusa_cost(m, hw, 1, 4, 2, shared_lm_head=True)
    assert own.flops == pytest.approx(shared.flops, rel=1e-12)
    lm = m.hidden * m.vocab * m.bytes_per_weight
    assert own.bytes - shared.bytes == pytest.approx(3 * lm, rel=1e-9)
    assert own.time > shared.time
    assert medusa_cost(m, device("h100-sxm", pass_overhead_us=500.0), 1, 4, 2).time == own.time
    launched = device("h100-sxm", launch_us=10.0)
    d = medusa_cost(m, launched, 1, 4, 2).time - medusa_cost(m, device("h100-sxm", launch_us=0.0), 1, 4, 2).time
    assert d == pytest.approx((2 + MEDUSA_OPS) * 10e-6, rel=1e-9)
    # where a calibration measured a small op (op_us), the heads' elementwise ops cost that, and
    # only the two products a launch
    ops = device("h100-sxm", launch_us=10.0, op_us=2.0)
    d = medusa_cost(m, ops, 1, 4, 2).time - medusa_cost(m, device("h100-sxm", launch_us=0.0), 1, 4, 2).time
    assert d == pytest.approx(2 * 10e-6 + MEDUSA_OPS * 2e-6, rel=1e-9)


def test_the_measured_profile_has_the_one_element_op():
    """The shipped CPU profile carries the one-element op its calibration read (its header's 5.4 us)."""
    h = hardware_from_node(Node("traces/hardware/cpu-measured.yaml", "t", "hardware"), Path(__file__).resolve().parents[1])
    assert h.op_s == pytest.approx(5.4e-6)


@pytest.mark.parametrize("w", [Work(tokens=64, seqs=1, pairs=64 * 2048, kv_read=2048, lm_tokens=64),  # a tree
                               Work(tokens=512, seqs=1, pairs=512 * 513 // 2, kv_read=512, lm_tokens=1)])  # prefill
def test_attention_efficiency_and_dense_reference_attention(w):
    """eta_attn slows only attention's products; attn_dense adds its KV reads to them (the CPU
    reference gathers, then computes) where the roofline takes the larger, and prices products
    over queries x gathered keys (a prefill chunk's masked causal half included)."""
    m = model("tiny")
    ideal = dict(IDEAL, launch_us=0.0, gemm_half_rows=0.0)
    base = ForwardCost(m, device("cpu", **ideal))
    fc, kv_bw = base.fc, base.kv_bw
    c = m.attn_flops_per_pair * w.pairs / fc                                         # one layer's products
    dense = m.attn_flops_per_pair * max(w.pairs, w.tokens * w.kv_read / w.seqs) / fc
    r = m.kv_elems_per_token_layer * m.bytes_per_kv * (w.kv_read + w.tokens) / kv_bw  # one layer's reads
    act = base.attn_act_per_tok * w.tokens / base.bw
    rest = base(w).time - m.layers * max(c, r + act)
    for eta, on in ((1.0, False), (0.25, False), (1.0, True), (0.25, True)):
        f = ForwardCost(m, device("cpu", **ideal, eta_attn=eta, attn_dense=on))
        layer = dense / eta + r + act if on else max(c / eta, r + act)
        assert f(w).time == pytest.approx(rest + m.layers * layer, rel=1e-12), (eta, on)
        assert f(w).flops == base(w).flops  # the useful work is the same; only its price changes
    if w.tokens == 512:
        assert dense == pytest.approx(2 * c, rel=0.01)  # the causal half is multiplied too
    from sim.errors import SpecError
    with pytest.raises(SpecError, match="eta_attn"):
        device("cpu", eta_attn=0.0)
    with pytest.raises(SpecError, match="attn_dense"):
        device("cpu", attn_dense="sometimes")


def test_attention_fields_round_trip(tmp_path):
    h = device("cpu", eta_attn=0.3, attn_dense=True, batch_query_us=120.0, elementwise_ns=1.5, logit_ns=2.5)
    h2 = round_trip(h, tmp_path)
    assert h2.eta_attn == pytest.approx(0.3) and h2.attn_dense is True
    assert h2.batch_query_s == pytest.approx(120e-6) and h2.elementwise_s == pytest.approx(1.5e-9)
    assert h2.logit_s == pytest.approx(2.5e-9)
    assert device("h100-sxm").eta_attn == 1.0 and device("h100-sxm").attn_dense is False


def test_batch_query_host_time_only_when_several_sequences_may_verify():
    m = model("tiny")
    base, extra = device("cpu"), device("cpu", batch_query_us=150.0)
    for w, charged in ((decode(4, 100), False),
                       (Work(tokens=5, seqs=1, pairs=500, kv_read=100, lm_tokens=5), False),  # one sequence
                       (Work(tokens=12, seqs=4, pairs=1200, kv_read=400, lm_tokens=12), True)):
        d = ForwardCost(m, extra)(w).time - ForwardCost(m, base)(w).time
        assert d == pytest.approx(m.layers * 150e-6 if charged else 0.0, abs=1e-12)


def test_sequences_with_several_query_tokens_pay_fused_query_and_key(tmp_path):
    """fused_query_us prices each query token of the sequences with several (verifying drafts, or
    a prefill chunk: Work.multi_tokens), fused_key_ns each key they attend to (Work.multi_kv), per
    query head and layer; decodes pay nothing; the fields load and round-trip, and every preset
    leaves them 0."""
    m = model("tiny")
    base, extra = device("cpu"), device("cpu", fused_query_us=1.5, fused_key_ns=20.0)
    for w, tokens, keys in (
            (decode(4, 100), 0, 0),
            (Work(tokens=512, seqs=1, pairs=512 * 513 // 2, kv_read=512, lm_tokens=1, multi_tokens=512,
                  multi_kv=512), 512, 512),
            (Work(tokens=12, seqs=4, pairs=1200, kv_read=400, lm_tokens=12, multi_tokens=12, multi_kv=412), 12, 412),
            (Work(tokens=9, seqs=4, pairs=900, kv_read=400, lm_tokens=9, mixed=1, multi_tokens=6, multi_kv=206), 6, 206)):
        d = ForwardCost(m, extra)(w).time - ForwardCost(m, base)(w).time
        assert d == pytest.approx(m.layers * m.heads * (tokens * 1.5e-6 + keys * 20e-9), abs=1e-12)
    h2 = round_trip(extra, tmp_path)
    assert (h2.fused_query_s, h2.fused_key_s) == pytest.approx((1.5e-6, 20e-9))
    assert (device("h100-sxm").fused_query_s, device("h100-sxm").fused_key_s) == (0.0, 0.0)
    from sim.errors import SpecError
    for key in ("fused_query_us", "fused_key_ns"):
        with pytest.raises(SpecError, match=key):
            device("cpu", **{key: -1.0})


def test_fused_rows_price_each_key_by_the_sequences_query_rows_and_size(tmp_path):
    """fused_rows replaces fused_key_ns for sequences of 2 up to a curve's last rows, at their mean
    rows (Work.multi_tokens / multi_seqs) interpolated linearly, and at their K and V's bytes
    (multi_kv keys) between the two sizes' curves, linearly in log size and held beyond; longer
    ones (a prefill chunk) keep fused_key_ns; fused_query_us is unchanged; arrays price as
    scalars; the table round-trips and bad tables are refused."""
    m = model("tiny")
    f0 = ForwardCost(m, device("cpu"))
    small, large = 100 * f0.kv_tok / 2**20, 10_000 * f0.kv_tok / 2**20  # MiB of 100 and 10,000 keys
    curves = {small: [[2, 30.0], [4, 10.0], [8, 50.0]], large: [[2, 60.0], [4, 40.0], [8, 80.0]]}
    base = device("cpu", fused_query_us=1.5, fused_key_ns=20.0)
    rows = device("cpu", fused_query_us=1.5, fused_key_ns=20.0, fused_rows=curves)

    def chains(seqs, n, ctx):  # `seqs` sequences verifying n rows each after ctx keys
        return Work(tokens=seqs * n, seqs=seqs, pairs=seqs * n * (ctx + n), kv_read=seqs * (ctx + n),
                    lm_tokens=seqs * n, multi_tokens=seqs * n, multi_kv=seqs * (ctx + n), multi_seqs=seqs)
    cases = (  # (Work, ns a key and query head)
        (chains(4, 4, 21), 10.0),  # 100 keys: the small curve
        (chains(4, 3, 22), 20.0),  # 3 rows: halfway between 30 and 10
        (chains(1, 4, 46), 10.0),  # below the small size: held
        (chains(4, 4, 2496), 40.0),  # 10,000 keys: the large curve
        (chains(5, 4, 196), 25.0),  # 1,000 keys: halfway in log size
        (chains(100, 8, 1992), 80.0),  # beyond the large size: held
        (Work(tokens=9, seqs=4, pairs=900, kv_read=404, lm_tokens=9, mixed=1, multi_tokens=6, multi_kv=100,
              multi_seqs=1), 30.0),  # 6 rows, small: halfway between 10 and 50
        (Work(tokens=512, seqs=1, pairs=512 * 513 // 2, kv_read=512, lm_tokens=1, multi_tokens=512, multi_kv=512,
              multi_seqs=1), 20.0))  # beyond the curves' rows: fused_key_ns
    for w, ns in cases:
        d = ForwardCost(m, rows)(w).time - ForwardCost(m, base)(w).time
        assert d == pytest.approx(m.layers * m.heads * w.multi_kv * (ns - 20.0) * 1e-9, abs=1e-12), w
    fields = ("tokens", "seqs", "pairs", "kv_read", "lm_tokens", "mixed", "multi_tokens", "multi_kv", "multi_seqs")
    vec = Work(*(np.array([getattr(w, f) for w, _ in cases]) for f in fields))
    one = [ForwardCost(m, rows)(w).time for w, _ in cases]
    assert ForwardCost(m, rows)(vec).time == pytest.approx(np.array(one), rel=1e-12)
    one_size = device("cpu", fused_key_ns=20.0, fused_rows={small: curves[small]})
    assert ForwardCost(m, one_size).fused_key_rate(16, 4, 10_000) == pytest.approx(10e-9 * m.heads)
    h2 = round_trip(rows, tmp_path)
    assert [b for b, _ in h2.fused_rows] == pytest.approx([mib * 2**20 for mib in sorted(curves)])
    for (_, got), (_, want) in zip(h2.fused_rows, sorted(curves.items())):
        assert [r for r, _ in got] == [r for r, _ in want]
        assert [x for _, x in got] == pytest.approx([x * 1e-9 for _, x in want])
    assert device("h100-sxm").fused_rows == ()
    from sim.errors import SpecError
    for bad in ({1: [[4, 1.0], [2, 1.0]]}, {1: [[2, -1.0]]}, {1: [[0, 1.0]]}, {1: [[2]]}, {-1: [[2, 1.0]]},
                {"a": [[2, 1.0]]}, [[2, 1.0]], {}):
        with pytest.raises(SpecError, match="fused_rows"):
            device("cpu", fused_rows=bad)


def test_fused_own_prices_the_calls_a_sequence_takes_alone(tmp_path):
    """Work.own_* (sim.cost.several_rows: a chunk of more than 64 rows, or the only sequence with
    2 to 64) are priced on fused_own at their mean rows, held beyond its last, at one call's size;
    the rest stay on fused_rows; without fused_own all are priced together, as before 0.51.0."""
    m = model("tiny")
    rows_curve = {1.0: [[2, 30.0], [4, 10.0], [64, 50.0]]}
    own_curve = {0.5: [[2, 100.0], [4, 60.0], [128, 20.0]]}
    base = device("cpu", fused_key_ns=5.0)
    both = device("cpu", fused_key_ns=5.0, fused_rows=rows_curve, fused_own=own_curve)
    pooled = device("cpu", fused_key_ns=5.0, fused_rows=rows_curve)

    def step(seqs):  # [(query rows, keys)], every sequence sampling its rows
        tok = sum(r for r, _ in seqs)
        return Work(tokens=tok, seqs=len(seqs), pairs=sum(r * k for r, k in seqs), kv_read=sum(k for _, k in seqs),
                    lm_tokens=tok, mixed=int(any(r == 1 for r, _ in seqs)), **several_rows(seqs))

    def extra(hw, w):  # seconds beyond fused_key_ns
        return ForwardCost(m, hw)(w).time - ForwardCost(m, base)(w).time

    per = m.layers * m.heads * 1e-9  # a key's ns, all layers and heads
    lone = step([(4, 200), (1, 100), (1, 100)])  # one chain among decodes: its own call
    assert (lone.own_seqs, lone.own_tokens, lone.own_kv) == (1, 4, 200)
    assert extra(both, lone) == pytest.approx(200 * (60.0 - 5.0) * per)
    assert extra(pooled, lone) == pytest.approx(200 * (10.0 - 5.0) * per)
    group = step([(4, 200), (4, 300)])  # two chains: the group call
    assert group.own_seqs == 0 and extra(both, group) == pytest.approx(extra(pooled, group))
    chunk = step([(256, 256), (4, 200), (2, 100)])  # a prefill chunk beside a group
    assert (chunk.own_seqs, chunk.own_kv, chunk.multi_seqs) == (1, 256, 3)
    assert extra(both, chunk) == pytest.approx((256 * (20.0 - 5.0) + 300 * (20.0 - 5.0)) * per)  # group at 3 rows
    two = step([(66, 100), (128, 200)])  # two chunks: mean 97 rows
    assert extra(both, two) == pytest.approx(300 * (60.0 + (20.0 - 60.0) * 93 / 124 - 5.0) * per)
    assert extra(pooled, two) == pytest.approx(0.0)  # beyond fused_rows' 64 rows: fused_key_ns
    fields = Work._fields
    cases = [lone, group, chunk, two]
    vec = Work(*(np.array([getattr(w, f) for w in cases]) for f in fields))
    assert ForwardCost(m, both)(vec).time == pytest.approx(np.array([ForwardCost(m, both)(w).time for w in cases]))
    h2 = round_trip(both, tmp_path)
    assert [b for b, _ in h2.fused_own] == pytest.approx([0.5 * 2**20])
    assert [x for _, x in h2.fused_own[0][1]] == pytest.approx([100e-9, 60e-9, 20e-9])
    assert device("h100-sxm").fused_own == ()
    from sim.errors import SpecError
    for bad in ({1: [[4, 1.0], [2, 1.0]]}, {1: [[2, -1.0]]}, [[2, 1.0]], {}):
        with pytest.raises(SpecError, match="fused_own"):
            device("cpu", fused_own=bad)


def test_verify_seqs_prices_each_sequence_of_the_group_calls(tmp_path):
    """hardware.verify_seqs adds, every layer, each sequence verifying in the fused group call
    (not a call of its own: Work.own_*) its share at that many such sequences and their mean
    query rows, sequences and rows linear between the measured points and held beyond them;
    nothing for decodes or a lone chain; arrays price as the scalars do; the table round-trips."""
    m = model("tiny")
    table = {2: [[4, 10.0], [16, 20.0]], 6: [[4, 30.0], [16, 40.0]]}
    base, extra = device("cpu"), device("cpu", verify_seqs=table)

    def step(seqs):  # [(query rows, keys)]
        tok = sum(r for r, _ in seqs)
        return Work(tokens=tok, seqs=len(seqs), pairs=sum(r * k for r, k in seqs), kv_read=sum(k for _, k in seqs),
                    lm_tokens=tok, mixed=int(any(r == 1 for r, _ in seqs)), **several_rows(seqs))

    def added(w):  # seconds, all layers
        return ForwardCost(m, extra)(w).time - ForwardCost(m, base)(w).time

    us = m.layers * 1e-6
    assert added(step([(1, 100)] * 8)) == 0.0  # decoding
    assert added(step([(6, 100), (1, 100), (1, 100)])) == 0.0  # a lone chain: a call of its own
    assert added(step([(2, 100)] * 4)) == pytest.approx(4 * 10.0 * us)
    assert added(step([(6, 100)] * 10)) == pytest.approx(10 * 35.0 * us)  # between 4 and 16 sequences
    assert added(step([(4, 100)] * 16)) == pytest.approx(16 * 30.0 * us)  # rows halfway between 2 and 6
    assert added(step([(2, 100)] * 2)) == pytest.approx(2 * 10.0 * us)  # held below 4 sequences
    assert added(step([(40, 100)] * 32)) == pytest.approx(32 * 40.0 * us)  # held beyond 16 and 6 rows
    # a prefill chunk takes a call of its own; the two chains beside it share a group call
    assert added(step([(256, 256), (2, 100), (6, 100)])) == pytest.approx(2 * 20.0 * us)
    cases = [step([(2, 100)] * 4), step([(6, 100)] * 10), step([(1, 100)] * 3), step([(256, 256), (2, 100), (6, 100)])]
    vec = Work(*(np.array([getattr(w, f) for w in cases]) for f in Work._fields))
    assert ForwardCost(m, extra)(vec).time == pytest.approx(np.array([ForwardCost(m, extra)(w).time for w in cases]))
    h2 = round_trip(extra, tmp_path)
    assert h2.verify_seqs == ((2, ((4, pytest.approx(10e-6)), (16, pytest.approx(20e-6)))),
                              (6, ((4, pytest.approx(30e-6)), (16, pytest.approx(40e-6)))))
    assert device("h100-sxm").verify_seqs == () and base.verify_seqs == ()
    from sim.errors import SpecError
    for bad in ({1: [[4, 1.0]]}, {2: [[4, 1.0], [2, 1.0]]}, {2: [[4, -1.0]]}, {"2": [[4, 1.0]]}, [[2, 1.0]], {}):
        with pytest.raises(SpecError, match="verify_seqs"):
            device("cpu", verify_seqs=bad)


def test_several_rows_lays_sequences_out_as_the_engines_attention_does():
    """sim.cost.several_rows follows kernels/attention.py: GROUP_MAX is its group_max; a chunk
    beyond it, or the only sequence of 2 to GROUP_MAX, takes a call of its own."""
    import inspect

    from kernels.attention import paged_attention_ref
    assert inspect.signature(paged_attention_ref).parameters["group_max"].default == GROUP_MAX
    def rows(seqs):  # but for the padding
        return {k: v for k, v in several_rows(seqs).items() if not k.endswith("_pad")}
    assert rows([(1, 9), (1, 9)]) == alike_rows(0, 0, 0)
    assert rows([(3, 10), (1, 5)]) == alike_rows(3, 10, 1)
    assert rows([(3, 10), (64, 70)]) == alike_rows(67, 80, 2) and alike_rows(67, 80, 2)["own_seqs"] == 0
    assert several_rows([(3, 10), (65, 70)])["own_seqs"] == 2
    assert several_rows([(3, 10), (4, 12), (65, 70)])["own_tokens"] == 65
    assert alike_rows(130, 300, 2)["own_kv"] == 300


def test_the_references_padded_calls_cost_their_longest_sequences_keys():
    """several_rows counts the keys the reference's calls gather beyond each sequence's own: a
    group call's sequences up to the longest of them, the decoding sequences' call likewise (not
    a call of its own); on a profile with attn_dense a step then costs what it would with every
    such sequence as long as the longest (its flops and bytes stay the work's own), elsewhere
    nothing more; arrays price as the scalars do."""
    pads = several_rows([(1, 100), (1, 300), (2, 50), (3, 250), (4, 150), (200, 400)])
    assert (pads["group_pad"], pads["decode_pad"]) == (200 + 0 + 100, 200)
    assert several_rows([(2, 50), (1, 80)])["group_pad"] == 0  # a lone chain: a call of its own
    m = model("tiny")
    dense, plain = device("cpu", attn_dense=True), device("h100-sxm")

    def step(seqs):
        tok = sum(r for r, _ in seqs)
        return Work(tokens=tok, seqs=len(seqs), pairs=sum(r * k for r, k in seqs), kv_read=sum(k - r for r, k in seqs),
                    lm_tokens=tok, mixed=int(any(r == 1 for r, _ in seqs) and any(r > 1 for r, _ in seqs)),
                    **several_rows(seqs))
    for spread, longest in (([(2, 100), (2, 300)], [(2, 300), (2, 300)]),
                            ([(1, 100), (1, 300), (1, 200)], [(1, 300)] * 3),
                            ([(1, 100), (1, 300), (3, 120), (3, 400)], [(1, 300), (1, 300), (3, 400), (3, 400)])):
        w, w_long = step(spread), step(longest)
        w_long = w_long._replace(pairs=w.pairs)  # the same visible pairs: only the gathered keys differ
        a, b = ForwardCost(m, dense)(w), ForwardCost(m, dense)(w_long)
        assert a.time == pytest.approx(b.time, rel=1e-12) and a.time > ForwardCost(m, dense)(
            w._replace(group_pad=0, decode_pad=0)).time
        bare = ForwardCost(m, dense)(w._replace(group_pad=0, decode_pad=0))
        assert (a.flops, a.bytes) == (bare.flops, bare.bytes)
        assert ForwardCost(m, plain)(w).time == ForwardCost(m, plain)(w._replace(group_pad=0, decode_pad=0)).time
    cases = [step([(2, 100), (2, 300)]), step([(1, 100), (1, 300), (1, 200)])]
    vec = Work(*(np.array([getattr(w, f) for w in cases]) for f in Work._fields))
    assert ForwardCost(m, dense)(vec).time == pytest.approx(np.array([ForwardCost(m, dense)(w).time for w in cases]))


def test_the_padded_calls_split_as_the_reference_splits_them():
    """call_seqs is the number of sequences the reference's attention puts in one call
    (kernels/attention.py splits a call whose gathered K/V and scores pass max_elems floats), and
    several_rows's padding is what the reference's calls gather beyond each sequence's keys, both
    found by recording its calls. On Llama-8B's shape a decoding sequence of 2,000 keys takes a
    call of its own (no padding); on the family's, 32 of 500 keys share one."""
    import inspect
    from dataclasses import replace

    import torch

    import kernels.attention as ka
    from sim.cost import GATHER_FLOATS, call_seqs, pad_of
    assert inspect.signature(ka.paged_attention_ref).parameters["max_elems"].default == GATHER_FLOATS
    assert pad_of([100, 200, 300, 150]) == 450 and pad_of([100, 200, 300, 150], 2) == 100 + 150
    assert pad_of([100, 200, 300], 5) == pad_of([100, 200, 300]) and pad_of([], 3) == 0
    assert call_seqs(None, 500, 1) == 0
    assert call_seqs(model("tiny"), 500, 1) == 32 and call_seqs(model("llama-3.1-8b"), 2000, 1) == 1
    torch.manual_seed(0)
    shape = replace(model("tiny"), heads=32, kv_heads=8, head_dim=128)  # Llama-8B's attention

    def calls(lens, rows, max_elems):
        """(kind, sequences, keys gathered beyond theirs) of each group call and decoding call."""
        got = []
        group, attend = ka._attend_group, ka._attend

        def record(kind, seqs):
            n = kv_lens[seqs]
            got.append((kind, len(seqs), int(len(seqs) * n.max() - n.sum())))

        def group_call(*a):
            record("group", torch.tensor(a[-1]))
            return group(*a)

        def attend_call(*a):
            if a[-1] is None:
                record("decode", a[5][a[-2]])
            return attend(*a)
        q_seq = [b for b, r in enumerate(rows) for _ in range(r)]
        q_pos = [n - r + j for n, r in zip(lens, rows) for j in range(r)]
        n, width = len(q_seq), max(lens)
        slots = torch.arange(len(lens) * width).view(len(lens), width)
        kv_lens = torch.tensor(lens)
        cache = torch.randn(slots.numel(), shape.kv_heads, shape.head_dim)
        ka._attend_group, ka._attend = group_call, attend_call
        try:
            ka.paged_attention_ref(torch.randn(n, shape.heads, shape.head_dim), cache, cache, slots, kv_lens,
                                   torch.tensor(q_seq), torch.tensor(q_pos), torch.full((len(lens),), 1 << 30),
                                   torch.zeros(n, dtype=torch.long), 0.1, max_elems=max_elems)
        finally:
            ka._attend_group, ka._attend = group, attend
        return got
    lens, rows = [300, 700, 450, 650, 500, 200, 600, 550, 400, 680], [2, 40, 3, 1, 4, 1, 2, 1, 5, 6]
    seqs = list(zip(rows, lens))
    for max_elems in (GATHER_FLOATS, 1 << 20, 1 << 23, 1 << 24):
        got = calls(lens, rows, max_elems)
        per = {"group": call_seqs(shape, max(lens), max(rows), max_elems), "decode": call_seqs(shape, max(lens), 1, max_elems)}
        for kind, pick in (("group", [n for r, n in seqs if r > 1]), ("decode", [n for r, n in seqs if r == 1])):
            mine = [c for c in got if c[0] == kind]
            assert [c[1] for c in mine] == [len(pick[i:i + per[kind]]) for i in range(0, len(pick), per[kind])]
            assert sum(c[2] for c in mine) == pad_of(pick, per[kind]), (max_elems, kind, mine)
        assert 1 < len(got) < len(lens) or max_elems != GATHER_FLOATS  # the default bound splits this step
    pads = several_rows(seqs, shape)
    got = calls(lens, rows, GATHER_FLOATS)
    assert pads["group_pad"] == sum(c[2] for c in got if c[0] == "group")  # a call a sequence: 0
    assert pads["decode_pad"] == sum(c[2] for c in got if c[0] == "decode") == 650 - 200
    assert (pads["group_pad"], pads["decode_pad"]) != (several_rows(seqs)["group_pad"], several_rows(seqs)["decode_pad"])
    llama = model("llama-3.1-8b")
    spread = [(1, 2000), (1, 1000), (1, 1500), (3, 2000), (3, 800)]
    assert several_rows(spread, llama)["decode_pad"] == 0 and several_rows(spread)["decode_pad"] == 1000 + 500
    assert several_rows(spread, llama)["group_pad"] == 0 and several_rows(spread)["group_pad"] == 1200


def test_elementwise_passes_add_per_token_and_layer():
    """elementwise_ns prices each layer's unfused elementwise passes per activation element,
    on top of the matmuls; 0 (every preset) adds nothing."""
    from sim.cost import elementwise_elems
    m = model("tiny")
    assert elementwise_elems(m)[0] == 4 * 256 + 2 * (4 + 2 * 2) * 64 + 2 * 768
    base, extra = device("cpu"), device("cpu", elementwise_ns=2.0)
    for tokens in (1, 64, 512):
        w = Work(tokens=tokens, seqs=1, pairs=tokens * (tokens + 1) // 2, kv_read=tokens, lm_tokens=1)
        d = ForwardCost(m, extra)(w).time - ForwardCost(m, base)(w).time
        assert d == pytest.approx(m.layers * tokens * elementwise_elems(m)[0] * 2e-9, rel=1e-9)
    assert device("h100-sxm").elementwise_s == 0.0


def test_logit_passes_add_per_lm_row_and_vocab_entry():
    """logit_ns prices the sampling or verification after a pass per logit element (LM-head rows
    x vocab), whatever the rest of the work; Medusa's heads pay it per head; 0 (every preset)
    adds nothing, and a pass without an LM head has no logits."""
    from sim.drafters import medusa_cost
    m = model("tiny")
    base, extra = device("cpu"), device("cpu", logit_ns=3.0)
    for tokens, lm in ((1, 1), (40, 40), (128, 1)):
        w = Work(tokens=tokens, seqs=1, pairs=tokens * 100, kv_read=100, lm_tokens=lm)
        d = ForwardCost(m, extra)(w).time - ForwardCost(m, base)(w).time
        assert d == pytest.approx(lm * m.vocab * 3e-9, rel=1e-9)
        assert ForwardCost(m, extra, lm_head=False)(w).time == ForwardCost(m, base, lm_head=False)(w).time
    d = medusa_cost(m, extra, 1, 4, 3).time - medusa_cost(m, base, 1, 4, 3).time
    assert d == pytest.approx(4 * 3 * m.vocab * 3e-9, rel=1e-9)
    assert device("h100-sxm").logit_s == 0.0
    from sim.errors import SpecError
    with pytest.raises(SpecError, match="logit_ns"):
        device("cpu", logit_ns=-1.0)


def test_verification_host_time_per_call_and_node(tmp_path):
    """verify_host: verify_call_us per call, tree_call_us more per tree call plus tree_node_us per
    node of it, pack_node_us per drafted node, spec_step_us once in a step with drafted sequences
    and spec_seq_us per drafted sequence; verify_calls counts one call per distinct shape among
    the sampling sequences, a chain (or a decode's empty shape) without a tree walk, and the
    sequences with drafts; the fields load and round-trip, and every preset leaves them 0."""
    from sim.cost import verify_calls, verify_host
    h = device("cpu", verify_call_us=100.0, tree_call_us=50.0, tree_node_us=2.0, pack_node_us=1.5,
               spec_step_us=30.0, spec_seq_us=4.0)
    assert verify_host(h) == pytest.approx(100e-6)  # a decode step: no drafted sequence
    assert verify_host(h, 3, 2, 20, 0, 40) == pytest.approx((300 + 100 + 40 + 60) * 1e-6)
    assert verify_host(h, 3, 2, 20, 5, 40) == pytest.approx((300 + 100 + 40 + 30 + 5 * 4 + 60) * 1e-6)
    tree = (-1, -1, 0, 1)
    chain = (-1, 0, 1)
    assert verify_calls([(), ()]) == (1, 0, 0, 0)
    assert verify_calls([chain, chain, chain]) == (1, 0, 0, 3)  # a static chain: one call for the batch
    assert verify_calls([tree, tree, (), chain]) == (3, 1, 4, 3)
    assert verify_calls(iter([tree, (-1, 0, 0, 1), (-1, -1, 0, 0)])) == (3, 3, 12, 3)  # dynamic trees: one call each
    h2 = round_trip(h, tmp_path)
    assert (h2.verify_call_s, h2.tree_call_s, h2.tree_node_s, h2.pack_node_s, h2.spec_step_s, h2.spec_seq_s) \
        == pytest.approx((100e-6, 50e-6, 2e-6, 1.5e-6, 30e-6, 4e-6))
    assert device("cpu", spec_seq_us=1.0).prices_verification  # alone, it is priced
    p = device("h100-sxm")
    assert (p.verify_call_s, p.tree_call_s, p.tree_node_s, p.pack_node_s, p.spec_step_s, p.spec_seq_s) == (0.0,) * 6
    from sim.errors import SpecError
    with pytest.raises(SpecError, match="tree_node_us"):
        device("cpu", tree_node_us=-1.0)


def test_drafters_price_their_logits_at_draft_logit_ns(tmp_path):
    """draft_logit_ns replaces logit_ns for a drafter's LM-head rows (HardwareSpec.drafter): a
    drafter pass's price moves by the difference per logit element, Medusa's heads too; the
    target's passes keep logit_ns; unmeasured (0), drafters pay logit_ns."""
    from sim.drafters import PassPricer, eagle_head, medusa_cost
    m = model("tiny")
    base, extra = device("cpu", logit_ns=3.0), device("cpu", logit_ns=3.0, draft_logit_ns=5.0)
    assert base.drafter() is base and extra.drafter().logit_s == pytest.approx(5e-9)
    head = eagle_head(m)
    passes = [(7, 2), 16, 16]
    lm_rows = 2 + 16 + 16
    d = PassPricer(head, extra.drafter(), 1)(2, 300, passes).time - PassPricer(head, base.drafter(), 1)(2, 300, passes).time
    assert d == pytest.approx(lm_rows * m.vocab * 2e-9, rel=1e-9)
    d = medusa_cost(m, extra.drafter(), 1, 4, 3).time - medusa_cost(m, base.drafter(), 1, 4, 3).time
    assert d == pytest.approx(4 * 3 * m.vocab * 2e-9, rel=1e-9)
    w = Work(tokens=5, seqs=1, pairs=500, kv_read=100, lm_tokens=5)
    assert ForwardCost(m, extra)(w).time == ForwardCost(m, base)(w).time
    assert round_trip(extra, tmp_path).draft_logit_s == pytest.approx(5e-9)


def test_drafter_products_run_at_their_rows_rate():
    """linear_cost (Medusa's heads, EAGLE's input projection) prices each product at its rows'
    measured rate, as the target's matrices are: rows / (rows + gemm_half_rows) of the peak, or
    the gemm_rows curve of its size; without either, the peak."""
    import numpy as np

    from sim.cost import compute_dtype, gemm_curve
    from sim.drafters import linear_cost
    m = model("tiny")
    peak = device("cpu").peak(compute_dtype(m)) * device("cpu").eta_compute
    f = 2.0 * 256 * 4096 * 4
    assert linear_cost(256, 4096, 4, m, device("cpu"), 1).compute_time == pytest.approx(f / peak, rel=1e-9)
    half = device("cpu", gemm_half_rows=12.0)
    assert linear_cost(256, 4096, 4, m, half, 1).compute_time == pytest.approx(f / peak * (4 + 12) / 4, rel=1e-9)
    table = {64: [[1, 0.05], [4, 0.1], [16, 0.4]], 4096: [[1, 0.1], [4, 0.2], [16, 0.8]]}
    curved = device("cpu", gemm_rows=table)
    at, frac = gemm_curve(curved.gemm_rows, 256 * 4096 * m.bytes_per_weight)
    assert float(np.interp(4, at, frac)) == pytest.approx(0.2)  # a 4 MiB matrix: the 4096 KiB curve
    assert linear_cost(256, 4096, 4, m, curved, 1, count=3).compute_time == pytest.approx(3 * f / peak / 0.2, rel=1e-9)


def test_drafter_fixed_host_time_per_first_and_later_pass(tmp_path):
    """draft_first_us is charged once a step (every pass of a catch-up chain, MTP's; once for
    Medusa's heads) and draft_pass_us once per later pass, compiled and direct pricing alike;
    both round-trip."""
    from sim.drafters import PassPricer
    m = model("tiny")
    base, fixed = device("cpu"), device("cpu", draft_first_us=200.0, draft_pass_us=70.0)
    h2 = round_trip(fixed, tmp_path)
    assert h2.draft_first_s == pytest.approx(200e-6) and h2.draft_pass_s == pytest.approx(70e-6)
    for n, passes in ((1, (1, 1, 1)), (4, ((9, 4), 4)), (3, (5,))):
        for how in ("__call__", "direct"):
            for catch_up, want in ((False, 200e-6 + (len(passes) - 1) * 70e-6), (True, len(passes) * 200e-6)):
                price = lambda hw: getattr(PassPricer(m, hw, 1, catch_up=catch_up), how)(n, 500, passes).time  # noqa: E731
                assert price(fixed) - price(base) == pytest.approx(want, rel=1e-9), (how, catch_up)
    # Medusa's heads, one call: a first pass's host work around it
    from sim.drafters import medusa_cost
    assert medusa_cost(m, fixed, 1, 4, 3).time - medusa_cost(m, base, 1, 4, 3).time == pytest.approx(200e-6, rel=1e-9)


def test_medusa_host_work_where_measured(tmp_path):
    """A profile with Medusa's own host figures prices its heads' call with them (fixed, per
    sequence, per sequence and node beyond one a head) instead of a first pass's; they round-trip,
    and a profile without them reads None and prices as before."""
    from sim.drafters import medusa_cost
    m = model("tiny")
    plain = device("cpu", draft_first_us=300.0, draft_seq_us=100.0)
    own = device("cpu", draft_first_us=300.0, draft_seq_us=100.0, medusa_first_us=110.0, medusa_seq_us=45.0,
                 medusa_node_us=0.25)
    assert plain.medusa_first_s is None and "medusa_first_us" not in plain.to_profile()
    back = round_trip(own, tmp_path)
    assert (back.medusa_first_s, back.medusa_seq_s, back.medusa_node_s) == pytest.approx((110e-6, 45e-6, 0.25e-6))
    bare = device("cpu", draft_first_us=0.0, draft_seq_us=0.0)
    for n, nodes in ((1, 4), (3, 63), (16, 63)):
        mine = medusa_cost(m, own, 1, 4, n, True, nodes).time - medusa_cost(m, bare, 1, 4, n, True, nodes).time
        assert mine == pytest.approx(110e-6 + n * (45e-6 + (nodes - 4) * 0.25e-6), rel=1e-9), (n, nodes)
        first = medusa_cost(m, plain, 1, 4, n, True, nodes).time - medusa_cost(m, bare, 1, 4, n, True, nodes).time
        assert first == pytest.approx(300e-6 + n * 100e-6, rel=1e-9)


REUSE = ((1, 0.5, 0.4, 0.3), (16, 0.9, 0.8, 0.7))


def product_time(fwd, tok, lm, sc):
    """The time a pass's products add to ForwardCost `fwd`'s token part at factors `sc`
    (layers, LM head): its time at them less its time with the products' compute at 0."""
    return fwd._token_part(tok, lm, sc)[0] - fwd._token_part(tok, lm, (0.0, 0.0))[0]


def resident(m):
    """A CPU with measured curves serving `m` with its weights in the last-level cache (the warm
    curves and gemm_reuse apply)."""
    return device("cpu", gemm_rows=CURVES, gemm_rows_warm=CURVES, cache_mb=1e6).for_weights(m.weight_bytes)


def test_reuse_factor_interpolates_by_rows_only_where_the_warm_curves_price():
    from dataclasses import replace
    from sim.cost import reuse_factor
    m = model("tiny")
    hw = resident(m)
    assert hw.resident_bytes > 0
    with_reuse = replace(hw, gemm_reuse=REUSE)
    assert reuse_factor(hw, 1, "first") == 1.0  # no table
    assert reuse_factor(with_reuse, 1, "first") == pytest.approx(0.5)
    assert reuse_factor(with_reuse, 16, "later_lm") == pytest.approx(0.7)
    assert reuse_factor(with_reuse, 6, "later_layer") == pytest.approx(0.4 + (0.8 - 0.4) * 5 / 15)
    assert reuse_factor(with_reuse, 64, "first") == pytest.approx(0.9)  # held beyond the ends
    assert reuse_factor(replace(with_reuse, resident_bytes=0.0), 1, "first") == 1.0  # read from memory: no reuse


def test_passes_price_reused_products_by_the_reuse_factors():
    """A shared LM head pays `first` in a step's first pass; later passes pay `later_lm` on the
    LM head and `later_layer` on the layers' products where every pass runs the same layers (not
    an MTP chain's modules); the draft model's own LM head pays nothing in its first pass.
    Compiled and direct pricing agree; only the products' compute time moves."""
    from dataclasses import replace
    from sim.drafters import PassPricer
    m = model("tiny")
    hw = resident(m)
    reuse = replace(hw, gemm_reuse=REUSE)
    one = replace(hw, gemm_reuse=tuple((r, 1.0, 1.0, 1.0) for r, *_ in REUSE))
    # the passes' products alone: ForwardCost's token part with and without the factors
    from sim.cost import ForwardCost
    fwd = ForwardCost(m, hw)

    products = partial(product_time, fwd)
    n, passes = 1, (1, 1, 1)
    for shared, again in ((True, True), (True, False), (False, True)):
        want = products(1, 1, (1.0, 0.5 if shared else 1.0)) - products(1, 1, (1.0, 1.0))
        want += 2 * (products(1, 1, (0.4 if again else 1.0, 0.3)) - products(1, 1, (1.0, 1.0)))
        for how in ("__call__", "direct"):
            price = lambda h: getattr(PassPricer(m, h, 1, shared_lm=shared, layers_again=again), how)(n, 500, passes)  # noqa: E731
            assert price(reuse).time - price(one).time == pytest.approx(want, rel=1e-6), (shared, again, how)
            assert price(reuse).flops == pytest.approx(price(one).flops)
        assert want < 0
    assert PassPricer(m, reuse, 1, shared_lm=True)(4, 900, ((9, 4), 4, 4)).time == pytest.approx(
        PassPricer(m, reuse, 1, shared_lm=True).direct(4, 900, ((9, 4), 4, 4)).time, rel=1e-9)


def test_schemes_say_which_weights_their_drafters_use_again():
    """EAGLE, EAGLE-2 and MTP share the target's LM head (engine/drafting/heads.py: the head's
    model ties it to the target's embedding, as the target's own); an MTP chain runs a module a
    pass; the draft model has its own weights and runs them every pass."""
    from sim.schemes import MTP, DraftModel, Eagle, Eagle2
    assert (Eagle.shared_lm, Eagle2.shared_lm, MTP.shared_lm, DraftModel.shared_lm) == (True, True, True, False)
    assert (Eagle.layers_again, Eagle2.layers_again, MTP.layers_again, DraftModel.layers_again) == (True, True, False, True)


def test_gemm_reuse_round_trips_and_bad_tables_are_refused(tmp_path):
    from dataclasses import replace
    from sim.errors import SpecError
    h = replace(device("cpu"), gemm_reuse=REUSE)
    assert round_trip(h, tmp_path).gemm_reuse == REUSE
    for bad, what in (([[4, 0.5, 0.5, 0.5], [1, 0.5, 0.5, 0.5]], "rows must ascend"), ([[1, 0.5, 0.5]], "at least 4"),
                      ([[1, 0.0, 0.5, 0.5]], r"gemm_reuse\[0\]\[1\]: expected a number > 0")):
        with pytest.raises(SpecError, match=what):
            device("cpu", gemm_reuse=bad)


STEP = ((1, 1.2, 1.5), (16, 1.1, 1.3))


def test_step_factor_prices_every_warm_product_in_a_steps_order():
    """gemm_step multiplies the compute time of a forward's layers' products and of its LM head
    by their factors at the pass's rows (interpolated, held beyond the ends), only where the warm
    curves price the model; linear_cost's matrices pay the factor of their kind."""
    from dataclasses import replace
    from sim.cost import ForwardCost, Work, step_factor
    from sim.drafters import linear_cost
    m = model("tiny")
    hw = resident(m)
    stepped = replace(hw, gemm_step=STEP)
    assert step_factor(hw, 1, "layers") == 1.0 and step_factor(replace(stepped, resident_bytes=0.0), 1, "lm") == 1.0
    assert step_factor(stepped, 6, "layers") == pytest.approx(1.2 + (1.1 - 1.2) * 5 / 15)
    assert step_factor(stepped, 64, "lm") == pytest.approx(1.3)
    assert list(step_factor(stepped, np.array([0, 16]), "lm")) == pytest.approx([1.5, 1.3])
    plain, both = ForwardCost(m, hw), ForwardCost(m, stepped)
    for tok, lm in ((1, 1), (6, 4), (40, 40)):
        want = plain._token_part(tok, lm, (step_factor(stepped, tok, "layers"), step_factor(stepped, lm, "lm")))
        assert both._token_part(tok, lm)[3] == pytest.approx(want[3], rel=1e-12)  # the compute roof's sum
        assert both(Work(tok, 1, 50, 50, lm)).flops == plain(Work(tok, 1, 50, 50, lm)).flops
    assert both._token_part(1, 1)[3] > plain._token_part(1, 1)[3]
    for part, f in (("layers", 1.2), ("lm", 1.5)):
        assert linear_cost(64, 256, 1, m, stepped, 1, part=part).compute_time == pytest.approx(
            f * linear_cost(64, 256, 1, m, hw, 1).compute_time, rel=1e-12)


def test_reused_products_keep_their_own_factor_beside_gemm_step():
    """gemm_reuse's factors are over the warm curves' price, so a reused product costs the same
    with gemm_step or without it; the products it leaves (a first pass's layers) pay gemm_step's."""
    from dataclasses import replace
    from sim.cost import ForwardCost
    from sim.drafters import PassPricer, linear_cost, medusa_cost
    m = model("tiny")
    reuse = replace(resident(m), gemm_reuse=REUSE)
    both = replace(reuse, gemm_step=STEP)
    fwd = ForwardCost(m, reuse)

    products = partial(product_time, fwd)
    for how in ("__call__", "direct"):
        price = lambda h: getattr(PassPricer(m, h, 1, shared_lm=True, layers_again=True), how)(1, 500, (1, 1, 1))  # noqa: E731
        want = products(1, 1, (1.2, 0.5)) - products(1, 1, (1.0, 0.5))  # the first pass's layers alone move
        assert price(both).time - price(reuse).time == pytest.approx(want, rel=1e-6), how
    # Medusa's heads: the shared LM head keeps gemm_reuse's `first`, its residual blocks pay gemm_step's layers
    shared = lambda h: medusa_cost(m, h, 1, 3, 1, shared_lm_head=True).compute_time  # noqa: E731
    blocks = linear_cost(m.hidden, m.hidden, 1, m, reuse, 1, count=3).compute_time
    assert shared(both) - shared(reuse) == pytest.approx(0.2 * blocks, rel=1e-9)


def test_gemm_step_round_trips_and_bad_tables_are_refused(tmp_path):
    from dataclasses import replace
    from sim.errors import SpecError
    h = replace(device("cpu"), gemm_step=STEP)
    assert round_trip(h, tmp_path).gemm_step == STEP
    for bad, what in (([[4, 1.0, 1.0], [4, 1.0, 1.0]], "rows must ascend"), ([[1, 0.5, 0.5, 0.5]], "at most 3"),
                      ([[1, 1.0, -1.0]], r"gemm_step\[0\]\[2\]: expected a number > 0")):
        with pytest.raises(SpecError, match=what):
            device("cpu", gemm_step=bad)


def test_a_profile_with_0_42_gemm_verify_loads_and_prices_as_without_it():
    """0.42.0's profiles wrote gemm_verify (the target's factor after a drafter's passes); since
    0.43.0 it is checked and ignored: such a profile loads, a step prices as without it, and a
    malformed table is still an error."""
    from sim.cost import ForwardCost
    from sim.errors import SpecError
    m = model("tiny")
    warm = dict(gemm_rows=CURVES, gemm_rows_warm=CURVES, cache_mb=1e6, gemm_step=[list(r) for r in STEP])
    with_verify = device("cpu", **warm, gemm_verify=[[6, 1.4, 1.6], [24, 1.3, 1.5]]).for_weights(m.weight_bytes)
    without = device("cpu", **warm).for_weights(m.weight_bytes)
    assert with_verify == without
    a, b = ForwardCost(m, with_verify), ForwardCost(m, without)
    assert all(a._token_part(t, t) == b._token_part(t, t) for t in (6, 24, 240))
    assert a._token_part(6, 6)[0] > ForwardCost(m, resident(m))._token_part(6, 6)[0]  # gemm_step's factor applies
    with pytest.raises(SpecError, match="rows must ascend"):
        device("cpu", gemm_verify=[[24, 1.0, 1.0], [6, 1.0, 1.0]])


def test_a_measured_fused_input_replaces_the_products_launch():
    """fused_input_cost: the 2h -> h product as linear_cost prices it, and where the profile timed
    the rest in the engine (draft_input_us a call, draft_input_row_us a row) that in place of the
    product's launch; an EAGLE head's passes pay it once a pass, compiled as priced directly."""
    from dataclasses import replace
    from sim.drafters import PassPricer, eagle_head, fused_input_cost, linear_cost
    m = model("tiny")
    hw = resident(m)
    h = m.hidden
    measured = replace(hw, draft_input_s=50e-6, draft_input_row_s=1e-6)
    for tok in (1, 8, 40):
        plain = linear_cost(2 * h, h, tok, m, hw, 1)
        assert fused_input_cost(m, hw, 1, tok) == plain
        got = fused_input_cost(m, measured, 1, tok)
        assert got.time == pytest.approx(plain.time - hw.launch_s + 50e-6 + tok * 1e-6)
        assert got.flops == plain.flops and got.bytes == plain.bytes
    head, passes = eagle_head(m), [(12, 4, 4), 4, 4]
    a, b = PassPricer(head, hw, 1, fuse_input=True), PassPricer(head, measured, 1, fuse_input=True)
    assert b(4, 400, passes).time == pytest.approx(b.direct(4, 400, passes).time, rel=1e-9)
    rows = 12 + 4 + 4
    assert b(4, 400, passes).time - a(4, 400, passes).time == pytest.approx(3 * (50e-6 - hw.launch_s) + rows * 1e-6)
