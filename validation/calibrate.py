"""Measure this device's ceilings and overheads and write a hardware profile the simulator reads
(DESIGN.md §8.1): `python -m validation.calibrate [--out traces/hardware/cpu-measured.yaml]`.

Microbenchmarks, medians over repeats, round-robin so a busy spell on a shared machine hits every
probe alike:
- copy bandwidth: `dst.copy_(src)` on a large fp32 tensor, 2 x size / time;
- weight streaming: a matrix-vector product over a large fp32 matrix (what batch-1 decode does),
  matrix bytes / time. `memory_tb_s` is the larger of the two and `eta_memory` the streaming
  rate's fraction of it (a read-only stream often beats a copy, whose writes also cost reads);
- matmul rate: square fp32 GEMM, 2n^3 / time -> `tflops.fp32` (this CPU has no bf16 units: bf16
  runs at the fp32 rate), `eta_compute` 1.0 (the rate is already the achieved one);
- launch: the engine's host time per layer on a tiny model (1 vs 3 layers), spread over the cost
  model's KERNELS_PER_LAYER operations -> `launch_us` (a one-element op is reported beside it);
- step and per-sequence overhead: the engine's whole decode step (schedule, forward, verify,
  commit) on a 1-layer tiny model at batch 1 and 16, less the per-layer time (the time that is
  neither compute nor bandwidth) -> `step_overhead_us`, `seq_overhead_us`; a bare forward call
  less its layer -> `pass_overhead_us` (what each drafter pass adds);
- allocator: one page-pool operation of `sim.kv.KVAllocator` -> `alloc_op_us`;
- small matmuls (CPU): a (M x 1024) @ (1024 x 4096) product at M = 16..128 against the GEMM peak
  -> `gemm_half_rows` M0 (the rate at M rows is peak * M / (M + M0));
- KV gather: the engine's paged attention decoding 8 sequences over 1,024 keys each, K and V
  bytes / time against the streaming rate -> `eta_kv`.
On a GPU the same probes run on the device (bf16 GEMM as well) and the file is named after it.
"""
from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # see engine/__main__.py

import argparse  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import torch  # noqa: E402

from sim.cost import KERNELS_PER_LAYER  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def _timer(device: str):
    def sync():
        if device == "cuda":
            torch.cuda.synchronize()
    return sync


def measure(size_mb: int = 512, gemm_n: int = 1024, repeats: int = 7, device: str = "cpu") -> dict:
    """Medians of every probe; sizes are parameters so a test can run the CPU form small."""
    sync = _timer(device)
    n = size_mb * 2**20 // 4
    src = torch.ones(n, device=device)
    dst = torch.empty_like(src)
    rows = max(1, n // 4096)
    mat = torch.ones(rows, 4096, device=device)
    vec = torch.ones(4096, device=device)
    a = torch.randn(gemm_n, gemm_n, device=device)
    b = torch.randn(gemm_n, gemm_n, device=device)
    one = torch.ones(1, device=device)
    dtypes = {"fp32": torch.float32} | ({"bf16": torch.bfloat16} if device == "cuda" else {})
    gemms = {k: (a.to(v), b.to(v)) for k, v in dtypes.items()}

    def t(fn) -> float:
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        return time.perf_counter() - t0

    probes = {"copy": lambda: dst.copy_(src), "stream": lambda: mat @ vec, "launch": lambda: one.add_(0.0)}
    probes |= {f"gemm_{k}": (lambda x=x, y=y: x @ y) for k, (x, y) in gemms.items()}
    for fn in probes.values():  # warm-up
        fn()
    times: dict[str, list[float]] = {k: [] for k in probes}
    for _ in range(repeats):
        for k, fn in probes.items():
            times[k].append(t(fn) if k != "launch" else min(t(fn) for _ in range(50)))
    med = {k: statistics.median(v) for k, v in times.items()}
    out = {"copy_bw": 2 * src.numel() * 4 / med["copy"], "stream_bw": mat.numel() * 4 / med["stream"],
           "launch_s": med["launch"]}
    out |= {f"flops_{k}": 2 * gemm_n**3 / med[f"gemm_{k}"] for k in dtypes}
    out |= step_overheads(device, repeats)
    out["alloc_op_s"] = allocator_op()
    out["gemm_half_rows"] = gemm_half_rows(out["flops_fp32"], device, repeats) if device == "cpu" else 0.0
    out["kv_gather_bw"] = kv_gather_bw(device, repeats)
    return out


def median_time(fn, device: str, repeats: int) -> float:
    """Median seconds of `repeats` calls of fn after one warm-up call (synchronised on a GPU)."""
    sync = _timer(device)
    fn()
    ts = []
    for _ in range(repeats):
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def gemm_half_rows(peak: float, device: str, repeats: int, k: int = 1024, n: int = 4096) -> float:
    """A matmul over M rows runs at peak * M / (M + M0): M0 = t * peak / (2 k n) - M, the median
    over M = 16..128 (where the product is compute-bound, not weight-streaming)."""
    w = torch.randn(n, k, device=device)
    est = []
    for m in (16, 32, 64, 128):
        x = torch.randn(m, k, device=device)
        t = median_time(lambda: x @ w.T, device, repeats)
        est.append(max(0.0, t * peak / (2 * k * n) - m))
    return statistics.median(est)


def kv_gather_bw(device: str, repeats: int, seqs: int = 8, context: int = 1024) -> float:
    """Bytes of K and V per second the engine's paged attention reads when each of `seqs`
    sequences decodes one token over `context` keys (8 KV heads of 64, fp32; GQA group 4)."""
    from kernels import get_ops
    nkv, d = 8, 64
    slots = seqs * context
    k = torch.randn(slots, nkv, d, device=device)
    v = torch.randn(slots, nkv, d, device=device)
    q = torch.randn(seqs, 4 * nkv, d, device=device)
    kv_slots = torch.arange(slots, device=device).view(seqs, context)
    lens = torch.full((seqs,), context, device=device)
    qs = torch.arange(seqs, device=device)
    qp = torch.full((seqs,), context - 1, device=device)
    ts = torch.full((seqs,), 2**30, device=device)
    anc = torch.zeros(seqs, dtype=torch.int64, device=device)
    ops = get_ops("torch" if device == "cpu" else "triton", check_values=False)
    t = median_time(lambda: ops.paged_attention(q, k, v, kv_slots, lens, qs, qp, ts, anc, 0.125), device, repeats)
    return 2 * slots * nkv * d * 4 / t


def step_overheads(device: str, repeats: int) -> dict:
    """Host time of whole engine steps (schedule, forward, verify, commit) on a tiny model, where
    compute and bandwidth are negligible: per layer (forward, 1 vs 3 layers), per sequence and the
    rest per step (the median decode step of a closed-loop run at batch 1 and at batch 16)."""
    from engine.model import Model, SeqQuery, StepBatch
    from engine.kv_cache import KVCache

    def spec(layers: int):
        from sim.models import ModelSpec
        return ModelSpec(name="probe", layers=layers, hidden=64, heads=4, kv_heads=2, head_dim=16, ffn=128,
                         vocab=256, bytes_per_weight=4, bytes_per_kv=4)

    def forward_time(layers: int) -> float:
        model = Model.random(spec(layers), seed=0, device=device)
        cache = KVCache(model.spec, 2, 16, device)
        step = StepBatch.pack([SeqQuery(tokens=[1], ctx=8, index=list(range(9)))])
        return median_time(lambda: model.forward(step, cache), device, repeats * 3)

    f1 = forward_time(1)
    per_layer = max(0.0, (forward_time(3) - f1) / 2)
    one, wide = engine_step(1, device), engine_step(16, device)
    per_seq = max(0.0, (wide - one) / 15)
    return {"layer_s": per_layer, "seq_s": per_seq, "step_s": max(0.0, one - per_layer - per_seq),
            "pass_s": max(0.0, f1 - per_layer)}


def engine_step(batch: int, device: str) -> float:
    """Median decode-step duration of the engine (its own clock) on a 1-layer tiny random model,
    `batch` sequences decoding 48 tokens each after a 16-token prompt."""
    import tempfile

    import yaml

    from engine.checkpoint import resolve
    from engine.runner import run_scheme
    from sim.spec import load_trace
    from sim.workload import make_requests
    doc = {"version": 1, "name": "calibrate-step", "seed": 1, "hardware": "cpu", "model": "tiny",
           "serving": {"max_num_seqs": batch, "max_num_batched_tokens": 4096, "page_size": 16,
                       "kv_pages": 64 * batch, "paging": "indexshare"},
           "workload": {"requests": batch, "arrival": {"process": "closed", "concurrency": batch},
                        "prompt_tokens": {"dist": "fixed", "value": 16},
                        "output_tokens": {"dist": "fixed", "value": 48}},
           "speculation": [{"scheme": "none"}],
           "engine": {"checkpoint": {"random_shape": "tiny", "layers": 1, "hidden": 64, "heads": 4, "kv_heads": 2,
                                     "head_dim": 16, "ffn": 128, "vocab": 256}, "device": device}}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t.yaml"
        path.write_text(yaml.safe_dump(doc))
        trace = load_trace(path)
    source = resolve(trace)
    res = run_scheme(trace, trace.speculation[0], make_requests(trace.workload, trace.seed), source.build())
    cols = res.result.steps.columns()
    decode = cols["duration"][(cols["batch_size"] == batch) & (cols["prefill_tokens"] == 0)]
    return float(statistics.median(decode))


def allocator_op() -> float:
    from sim.kv import KVAllocator
    kv = KVAllocator(4096, 16, "indexshare")
    t0 = time.perf_counter()
    for i in range(2000):
        kv.grow(i, 16)  # one page each
        kv.release(i)
    return (time.perf_counter() - t0) / 4000


def profile_yaml(m: dict, name: str, memory_gb: float, note: str) -> str:
    fp32 = m["flops_fp32"] / 1e12
    peak_bw = max(m["copy_bw"], m["stream_bw"])
    bf16 = m.get("flops_bf16", m["flops_fp32"]) / 1e12
    return f"""# Measured by `python -m validation.calibrate` ({note}).
# copy bandwidth {m['copy_bw'] / 1e9:.2f} GB/s (2 x size / time); weight streaming {m['stream_bw'] / 1e9:.2f} GB/s;
# fp32 GEMM {fp32 * 1e3:.1f} GFLOP/s; one-element op {m['launch_s'] * 1e6:.1f} us; engine host time
# {m['layer_s'] * 1e6:.0f} us per layer, {m['step_s'] * 1e6:.0f} us per step, {m['seq_s'] * 1e6:.1f} us per sequence,
# {m['pass_s'] * 1e6:.0f} us per forward pass beyond its layers;
# allocator op {m['alloc_op_s'] * 1e6:.2f} us; matmul half-rate rows {m['gemm_half_rows']:.1f};
# paged-attention KV gather {m['kv_gather_bw'] / 1e9:.2f} GB/s.
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
allreduce_latency_us: 0
gemm_half_rows: {m['gemm_half_rows']:.2f}
eta_kv: {min(1.0, m['kv_gather_bw'] / m['stream_bw']):.4f}
pass_overhead_us: {m['pass_s'] * 1e6:.1f}
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m validation.calibrate", description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None, help="profile path (default traces/hardware/<device>-measured.yaml)")
    ap.add_argument("--size-mb", type=int, default=512)
    ap.add_argument("--gemm", type=int, default=1024)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    name = torch.cuda.get_device_name() if device == "cuda" else f"{os.cpu_count()}-core CPU"
    mem = (torch.cuda.get_device_properties(0).total_memory if device == "cuda"
           else os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")) / 1e9
    m = measure(args.size_mb, args.gemm, args.repeats, device)
    out = args.out or ROOT / "traces" / "hardware" / f"{'gpu' if device == 'cuda' else 'cpu'}-measured.yaml"
    note = f"{time.strftime('%Y-%m-%d')}, {torch.get_num_threads()} threads, {args.size_mb} MB probes, {args.repeats} repeats"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(profile_yaml(m, name, mem, note))
    print(out.read_text())
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
