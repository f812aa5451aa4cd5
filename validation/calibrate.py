"""Measure this device's ceilings and overheads and write a hardware profile the simulator reads
(DESIGN.md §8.1): `python -m validation.calibrate [--out traces/hardware/cpu-measured.yaml]`.

Every probe runs round-robin with all the others, `--repeats` rounds, and a figure is the mean of
its calls over all rounds: what the engine's throughput sees is its mean step, slow spells and
interruptions included (a fastest call, or a median, reads this host 10-30% faster than the
engine's steps run). This host's speed drifts by a third or more within minutes
(a Python loop runs 0.22-0.31 s from one second to the next, a calibration an hour later reads
the per-layer host time at half). So a profile is only good for the minutes it was measured in:
`python -m validation steptime` and `python -m validation compare --calibrate` run these
rounds interleaved with what they measure and predict from that profile.
- copy bandwidth: `dst.copy_(src)` on a large fp32 tensor, 2 x size / time;
- weight streaming: a matrix-vector product over a large fp32 matrix (what batch-1 decode does),
  matrix bytes / time. `memory_tb_s` is the larger of the two and `eta_memory` the streaming
  rate's fraction of it (a read-only stream often beats a copy, whose writes also cost reads);
- matmul rate: square fp32 GEMM, 2n^3 / time -> `tflops.fp32` (this CPU has no bf16 units: bf16
  runs at the fp32 rate), `eta_compute` 1.0 (the rate is already the achieved one);
- launch: the engine's host time per layer on a tiny model (1 vs 6 layers), spread over the cost
  model's KERNELS_PER_LAYER operations -> `launch_us` (a one-element op is reported beside it);
- step and per-sequence overhead: the engine's whole decode step (schedule, forward, verify,
  commit) on a 1-layer tiny model at batch 1 and 16 (the mean step of a run), less the
  per-layer time -> `step_overhead_us`, `seq_overhead_us`; a bare forward call less its layer
  -> `pass_overhead_us` (what each drafter pass adds); the per-layer time of the same forward
  verifying a 2-node chain, less a decode's -> `multi_query_us` (its other attention path); the
  per-layer time of a forward of 4 sequences each verifying a 2-node chain, less that of the
  same 4 decoding, beyond multi_query_us -> `batch_query_us` (the padded fused-attention path
  a batch of chains or trees takes); the
  growth per sequence of a speculative step (one MTP module, batch 1 and 16) beyond a decode
  step's -> `draft_seq_us` (per sequence per drafter pass);
- allocator: one page-pool operation of `sim.kv.KVAllocator` -> `alloc_op_us`;
- small matmuls (CPU): a (M x 1024) @ (1024 x 4096) product at M = 16..128 against the GEMM peak
  -> `gemm_half_rows` M0 (the rate at M rows is peak * M / (M + M0)); and the measured curves
  that replace it, `gemm_rows`: the engine's product `x @ W.T` for weight matrices of 0.75 to
  64 MiB (GEMM_SIZES) at M = 1..512 rows (GEMM_ROWS), each call a pass over 64 MiB of distinct
  matrices (out of L2, as a forward pass meets each weight once), as a fraction of the GEMM
  peak. CPU BLAS changes kernels with M (4 rows can cost 1.5x 3 rows) and its rate depends on
  the matrix size, which no one-parameter curve follows;
- KV gather: the engine's paged attention decoding 8 sequences over 1,024 keys each (one query
  head per KV head), K and V bytes / time against the streaming rate -> `eta_kv`;
- attention products: the engine's paged attention verifying chains of 8 and of 64 tokens in
  4 sequences (4 query heads on 2 KV heads) after 1,024 keys; the extra queries' FLOPs (against
  all gathered keys, as the reference computes them) over the extra time, against the GEMM peak
  -> `eta_attn` (the gathering, nearly the same in both, cancels; an earlier form that varied
  the keys instead had to subtract the gather time and read 0.37-1.0 between calibrations);
  `attn_dense: true` on a CPU, whose reference attention gathers the keys before computing.
  On a GPU neither is measured (eta_attn 1, the roofline: the probe's products
  take microseconds there);
- elementwise passes (CPU): one layer's norms, rotary embedding, gating and residual adds as
  the engine runs them, unfused, over 256 tokens of the family's shape, per activation element
  (sim.cost.elementwise_elems) -> `elementwise_ns`, which the cost model adds to the matmuls (a
  128-token prefill of the family spends about 40% of its time in such passes); 0 on a GPU.
On a GPU the same probes run on the device (bf16 GEMM as well; no matmul curves: its small-M
products are bandwidth-bound, which the roofline prices) and the file is named after it.
"""
from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # see engine/__main__.py

import argparse  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import torch  # noqa: E402

from sim.cost import KERNELS_PER_LAYER, elementwise_elems  # noqa: E402
from sim.models import ModelSpec  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
GEMM_SIZES = ((256, 768), (512, 2048), (1024, 4096), (2048, 8192))  # (k, n): 0.75, 4, 16, 64 MiB fp32
DEEP = 6  # layers of the deeper host-time probe model (against 1: the difference over 5 layers)
GEMM_ROWS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 128, 256, 512)


def _timer(device: str):
    def sync():
        if device == "cuda":
            torch.cuda.synchronize()
    return sync


class Calibration:
    """This device's probes, run in round-robin rounds; each figure is the mean of the probe's
    calls over all rounds. Other measurements (the step-time grid, compare's engine
    runs) can run between rounds, so the profile and what it predicts see the same spells of a
    drifting host. Sizes are parameters so a test can run the CPU form small."""

    def __init__(self, size_mb: int = 512, gemm_n: int = 1024, device: str = "cpu"):
        self.size_mb, self.gemm_n = size_mb, gemm_n
        n = size_mb * 2**20 // 4
        src = torch.ones(n, device=device)
        dst = torch.empty_like(src)
        mat = torch.ones(max(1, n // 4096), 4096, device=device)
        vec = torch.ones(4096, device=device)
        a = torch.randn(gemm_n, gemm_n, device=device)
        b = torch.randn(gemm_n, gemm_n, device=device)
        one = torch.ones(1, device=device)
        self.dtypes = {"fp32": torch.float32} | ({"bf16": torch.bfloat16} if device == "cuda" else {})
        gemms = {k: (a.to(v), b.to(v)) for k, v in self.dtypes.items()}
        small = gemm_n < 1024  # the test-sized form
        self.curves = matmul_probes(device, ((64, 128), (128, 256)) if small else GEMM_SIZES,
                                    (1, 4, 16) if small else GEMM_ROWS) if device == "cpu" else {}
        self.halves = matmul_probes(device, ((1024, 4096),), (16, 32, 64, 128)) if device == "cpu" else {}
        self.copy_bytes, self.stream_bytes = 2 * src.numel() * 4, mat.numel() * 4

        def timed(fn, calls: int = 1):
            return lambda: mean_time(fn, device, calls, warm=False)

        probes = {"copy": timed(lambda: dst.copy_(src)), "stream": timed(lambda: mat @ vec),
                  "launch": timed(lambda: one.add_(0.0), 50)}
        probes |= {f"gemm_{k}": timed(lambda x=x, y=y: x @ y, 3) for k, (x, y) in gemms.items()}
        probes |= {f"forward{k}": timed(forward_probe(k, device), 10) for k in (1, DEEP)}
        probes |= {f"verify{k}": timed(forward_probe(k, device, nodes=2), 10) for k in (1, DEEP)}
        # several sequences verifying at once against the same sequences decoding (what a batch
        # of chains or trees pays per layer beyond a decode: the padded fused-attention path)
        probes |= {f"{kind}{k}": timed(forward_probe(k, device, nodes=nodes, seqs=VERIFY_SEQS), 10)
                   for kind, nodes in (("decodes", 0), ("verifies", 2)) for k in (1, DEEP)}
        probes |= {f"engine{k}": (lambda k=k: engine_step(k, device)) for k in (1, 16)}
        probes |= {f"mtp{k}": (lambda k=k: engine_step(k, device, "mtp")) for k in (1, 16)}
        # two calls each where the working set fits in cache (the first refills what the copy
        # probe swept out; an engine step finds part of what the previous step touched)
        probes |= {("curve", *key): timed(fn, 2) for key, (fn, _) in self.curves.items()}
        probes |= {("half", *key): timed(fn, 2) for key, (fn, _) in self.halves.items()}
        probes["kv_gather"] = timed(kv_gather_probe(device), 2)
        # the torch reference (CPU) gathers the keys, then computes; the GPU kernel's products at
        # this size take microseconds, so it keeps eta_attn 1 (the roofline) unmeasured
        self.serial = device == "cpu"
        if self.serial:
            probes |= {f"attn{n}": timed(attention_probe(device, n), 2) for n in (ATTN_FEW, ATTN_MANY)}
            probes["elementwise"] = timed(elementwise_probe(device), 3)
        self.probes = probes
        for fn in probes.values():  # warm-up
            fn()
        self.samples: dict = {k: [] for k in probes}
        self._order = list(probes)
        self._next = 0  # the probe the next tick runs

    def round(self) -> None:
        """One call of every probe, from wherever the last tick stopped."""
        self.tick(len(self._order))

    def tick(self, n: int = 1) -> None:
        """The next `n` probes of the round-robin cycle: called between the measurements a
        profile predicts, so the probes' calls spread over the same minutes as those (this host
        swings by up to 1.8x within seconds, in spells of about ten)."""
        for _ in range(n):
            k = self._order[self._next]
            self.samples[k].append(self.probes[k]())
            self._next = (self._next + 1) % len(self._order)

    def complete(self) -> None:
        """Finish the current cycle, so every probe has as many calls as the others (and one at least)."""
        if self._next or not self.samples[self._order[0]]:
            self.tick(len(self._order) - self._next)

    def figures(self) -> dict:
        """Every probe's figure from its calls so far (every probe called at least once: `complete`)."""
        t = {k: statistics.mean(v) for k, v in self.samples.items()}
        n3 = self.gemm_n ** 3
        out = {"copy_bw": self.copy_bytes / t["copy"], "stream_bw": self.stream_bytes / t["stream"],
               "launch_s": t["launch"], "rounds": min(len(v) for v in self.samples.values())}
        out |= {f"flops_{k}": 2 * n3 / t[f"gemm_{k}"] for k in self.dtypes}
        peak = out["flops_fp32"]
        per_layer = max(0.0, (t[f"forward{DEEP}"] - t["forward1"]) / (DEEP - 1))
        per_seq = max(0.0, (t["engine16"] - t["engine1"]) / 15)
        out |= {"layer_s": per_layer, "seq_s": per_seq, "step_s": max(0.0, t["engine1"] - per_layer - per_seq),
                "pass_s": max(0.0, t["forward1"] - per_layer),
                "multi_query_s": max(0.0, (t[f"verify{DEEP}"] - t["verify1"]) / (DEEP - 1) - per_layer),
                "draft_seq_s": max(0.0, (t["mtp16"] - t["mtp1"]) / 15 - per_seq)}
        batched = (t[f"verifies{DEEP}"] - t["verifies1"] - t[f"decodes{DEEP}"] + t["decodes1"]) / (DEEP - 1)
        out["batch_query_s"] = max(0.0, batched - out["multi_query_s"])
        out["alloc_op_s"] = allocator_op()
        out["gemm_half_rows"] = statistics.median(  # rate peak * M / (M + M0) -> M0 = t * peak / flops * M - M
            max(0.0, t[("half", *key)] * peak / flops * key[1] - key[1]) for key, (_, flops) in self.halves.items()
        ) if self.halves else 0.0
        if self.curves:
            table: dict[int, list] = {}
            for (kib, m), (_, flops) in self.curves.items():
                table.setdefault(kib, []).append([m, round(flops / (t[("curve", kib, m)] * peak), 4)])
            out["gemm_rows"] = table
        out["kv_gather_bw"] = KV_GATHER_BYTES / t["kv_gather"]
        out["eta_attn"] = attention_efficiency(t[f"attn{ATTN_FEW}"], t[f"attn{ATTN_MANY}"], out["kv_gather_bw"],
                                               peak) if self.serial else 1.0
        out["attn_dense"] = self.serial
        out["elementwise_s"] = t["elementwise"] / (EW_TOKENS * elementwise_elems(EW_SPEC)[0]) if self.serial else 0.0
        return out


def measure(size_mb: int = 512, gemm_n: int = 1024, repeats: int = 7, device: str = "cpu") -> dict:
    """Every probe's figure over `repeats` rounds (Calibration)."""
    cal = Calibration(size_mb, gemm_n, device)
    for _ in range(max(1, repeats)):
        cal.round()
    return cal.figures()


def mean_time(fn, device: str, calls: int, warm: bool = True) -> float:
    """Mean seconds of `calls` calls of fn, after one warm-up call unless `warm` is False
    (synchronised on a GPU)."""
    sync = _timer(device)
    if warm:
        fn()
    sync()
    t0 = time.perf_counter()
    for _ in range(max(1, calls)):
        fn()
    sync()
    return (time.perf_counter() - t0) / max(1, calls)


def matmul_probes(device: str, sizes, rows, pool_bytes: int = 64 << 20) -> dict:
    """{(weight KiB, M): (call, FLOPs of one product)}: `x @ W.T` (x: (M, k), W: (n, k)) over
    distinct matrices filling `pool_bytes`, as a forward pass meets each weight once (a matrix
    multiplied again straight away sits in L2 and runs up to 4x faster); time per call / count."""
    out = {}
    for k, n in sizes:
        ws = [torch.randn(n, k, device=device) for _ in range(max(1, pool_bytes // (4 * k * n)))]
        for m in rows:
            x = torch.randn(m, k, device=device)
            out[(k * n * 4 // 1024, m)] = (lambda x=x, ws=ws: [x @ w.T for w in ws], 2 * m * k * n * len(ws))
    return out


KV_SEQS, KV_CONTEXT, KV_HEADS, KV_DIM = 8, 1024, 8, 64
KV_GATHER_BYTES = 2 * KV_SEQS * KV_CONTEXT * KV_HEADS * KV_DIM * 4  # K and V, fp32


def kv_gather_probe(device: str):
    """The engine's paged attention with KV_SEQS sequences each decoding one token over
    KV_CONTEXT keys (KV_HEADS KV heads of KV_DIM, fp32), KV_GATHER_BYTES per call. One query
    head per KV head, so the scores' FLOPs stay small beside the gather: the cost model prices
    them separately, on the compute roof (a GQA group of 4 read as bandwidth would charge a
    model with groups of 2 for FLOPs it does not do)."""
    from kernels import get_ops
    seqs, context, nkv, d = KV_SEQS, KV_CONTEXT, KV_HEADS, KV_DIM
    slots = seqs * context
    k = torch.randn(slots, nkv, d, device=device)
    v = torch.randn(slots, nkv, d, device=device)
    q = torch.randn(seqs, nkv, d, device=device)
    kv_slots = torch.arange(slots, device=device).view(seqs, context)
    lens = torch.full((seqs,), context, device=device)
    qs = torch.arange(seqs, device=device)
    qp = torch.full((seqs,), context - 1, device=device)
    ts = torch.full((seqs,), 2**30, device=device)
    anc = torch.zeros(seqs, dtype=torch.int64, device=device)
    ops = get_ops("torch" if device == "cpu" else "triton", check_values=False)
    return lambda: ops.paged_attention(q, k, v, kv_slots, lens, qs, qp, ts, anc, 0.125)


ATTN_SEQS, ATTN_HEADS, ATTN_CONTEXT, ATTN_FEW, ATTN_MANY = 4, 4, 1024, 8, 64


def attention_probe(device: str, queries: int):
    """The engine's paged attention verifying a chain of `queries` tokens in each of ATTN_SEQS
    sequences after ATTN_CONTEXT keys (ATTN_HEADS query heads on KV_HEADS // 4 KV heads of
    KV_DIM, the trained family's shape; fp32): the padded fused path a batch of chains or trees
    takes."""
    from kernels import get_ops
    from kernels.attention import NO_TREE
    S, n, nkv, d = ATTN_SEQS, queries, KV_HEADS // 4, KV_DIM
    per = ATTN_CONTEXT + n
    k = torch.randn(S * per, nkv, d, device=device)
    v = torch.randn(S * per, nkv, d, device=device)
    q = torch.randn(S * n, ATTN_HEADS, d, device=device)
    kv_slots = torch.arange(S * per, device=device).view(S, per)
    lens = torch.full((S,), per, device=device)
    qs = torch.arange(S, device=device).repeat_interleave(n)
    qp = torch.arange(ATTN_CONTEXT, per, device=device).repeat(S)
    ts = torch.full((S,), NO_TREE, device=device)
    anc = torch.zeros(S * n, dtype=torch.int64, device=device)
    ops = get_ops("torch" if device == "cpu" else "triton", check_values=False)
    return lambda: ops.paged_attention(q, k, v, kv_slots, lens, qs, qp, ts, anc, 0.125)


def attention_efficiency(t_few: float, t_many: float, gather_bw: float, peak: float) -> float:
    """eta_attn from attention_probe with ATTN_FEW and ATTN_MANY queries per sequence over the
    same context: the extra queries' score and value FLOPs (each query against all its
    sequence's gathered keys, as the reference computes them) over the extra time, less the
    reading of the few extra keys at the KV gather rate, as a fraction of the GEMM peak. The
    probes' fixed costs and nearly all of their gathering cancel in the difference."""
    def rect(n):  # products per sequence: its queries x its gathered keys
        return n * (ATTN_CONTEXT + n)
    flops = 4 * ATTN_HEADS * KV_DIM * ATTN_SEQS * (rect(ATTN_MANY) - rect(ATTN_FEW))
    read = ATTN_SEQS * (ATTN_MANY - ATTN_FEW) * 2 * (KV_HEADS // 4) * KV_DIM * 4 / gather_bw
    compute = t_many - t_few - read
    return 1.0 if compute <= 0 else min(1.0, max(0.01, flops / compute / peak))


EW_TOKENS = 256  # tokens of the elementwise probe
EW_SPEC = ModelSpec(name="elementwise-probe", layers=1, hidden=256, heads=4, kv_heads=2, head_dim=64, ffn=768,
                    vocab=256, bytes_per_weight=4, bytes_per_kv=4)  # the trained family's layer


def elementwise_probe(device: str):
    """One layer's elementwise passes as the engine's forward runs them, over EW_TOKENS tokens
    of EW_SPEC's shape (fp32): the two norms, rotary embedding of q and k and their layout
    copies, the gate's SiLU and product, the two residual adds; matmuls and attention left out.
    Its time per sim.cost.elementwise_elems element -> `elementwise_ns`."""
    from engine.model import NORM_EPS, ROPE_THETA, Rope
    from kernels import get_ops
    s, n = EW_SPEC, EW_TOKENS
    ops = get_ops("torch" if device == "cpu" else "triton", check_values=False)
    rope = Rope(s.head_dim, ROPE_THETA, device)
    x = torch.randn(n, s.hidden, device=device)                                       # (n, H)
    w = torch.ones(s.hidden, device=device)
    qkv = torch.randn(n, (s.heads + 2 * s.kv_heads) * s.head_dim, device=device)      # (n, (nh + 2 nkv) d)
    gu = torch.randn(n, 2 * s.ffn, device=device)                                     # (n, 2F)
    pos = torch.arange(n, device=device)
    nq, nk = s.heads * s.head_dim, (s.heads + s.kv_heads) * s.head_dim

    def run():
        h = ops.rms_norm(x, w, NORM_EPS)
        q = rope(qkv[:, :nq].view(n, s.heads, s.head_dim), pos).contiguous()
        k = rope(qkv[:, nq:nk].view(n, s.kv_heads, s.head_dim), pos).contiguous()
        y = x + h
        h = ops.rms_norm(y, w, NORM_EPS)
        a = torch.nn.functional.silu(gu[:, :s.ffn]) * gu[:, s.ffn:]
        return y + h, q, k, a
    return run


VERIFY_SEQS = 4  # sequences of the verify host-time probe


def forward_probe(layers: int, device: str, nodes: int = 0, seqs: int = 1):
    """A bare forward call of a tiny random model (hidden 64) with `layers` layers, `seqs`
    sequences each with one decode token (and a chain of `nodes` drafted tokens to verify) over
    8 keys: compute and bandwidth are negligible, so its time is host time."""
    from engine.kv_cache import KVCache
    from engine.model import Model, SeqQuery, StepBatch
    spec = ModelSpec(name="probe", layers=layers, hidden=64, heads=4, kv_heads=2, head_dim=16, ffn=128,
                     vocab=256, bytes_per_weight=4, bytes_per_kv=4)
    model = Model.random(spec, seed=0, device=device)
    cache = KVCache(model.spec, seqs, 16, device)
    chain = tuple(range(-1, nodes - 1))
    step = StepBatch.pack([SeqQuery(tokens=[1], ctx=8, index=list(range(16 * b, 16 * b + 9)), nodes=[2] * nodes,
                                    parents=chain, spec_slots=list(range(16 * b + 9, 16 * b + 9 + nodes)))
                           for b in range(seqs)])
    return lambda: model.forward(step, cache)


def engine_step(batch: int, device: str, scheme: str = "none") -> float:
    """Mean decode-step duration of the engine (its own clock) on a 1-layer tiny random model,
    `batch` sequences decoding 48 tokens each after a 16-token prompt, with `scheme` (mtp: one
    module drafting one token per step)."""
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
           "speculation": [{"scheme": scheme} | ({"depth": 1} if scheme == "mtp" else {})],
           "engine": {"checkpoint": {"random_shape": "tiny", "layers": 1, "hidden": 64, "heads": 4, "kv_heads": 2,
                                     "head_dim": 16, "ffn": 128, "vocab": 256}, "device": device}}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t.yaml"
        path.write_text(yaml.safe_dump(doc))
        trace = load_trace(path)
    source = resolve(trace)
    model = source.build()
    res = run_scheme(trace, trace.speculation[0], make_requests(trace.workload, trace.seed), model,
                     drafters=source.drafters(model) if scheme != "none" else None)
    cols = res.result.steps.columns()
    decode = cols["duration"][(cols["batch_size"] == batch) & (cols["prefill_tokens"] == 0)]
    return float(statistics.mean(decode))


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
    return f"""# Measured by `python -m validation.calibrate` ({note}, {m['rounds']} rounds).
# copy bandwidth {m['copy_bw'] / 1e9:.2f} GB/s (2 x size / time); weight streaming {m['stream_bw'] / 1e9:.2f} GB/s;
# fp32 GEMM {fp32 * 1e3:.1f} GFLOP/s; one-element op {m['launch_s'] * 1e6:.1f} us; engine host time
# {m['layer_s'] * 1e6:.0f} us per layer, {m['step_s'] * 1e6:.0f} us per step, {m['seq_s'] * 1e6:.1f} us per sequence,
# {m['pass_s'] * 1e6:.0f} us per forward pass beyond its layers, {m['multi_query_s'] * 1e6:.0f} us more per layer to verify
# ({m['batch_query_s'] * 1e6:.0f} us more where several sequences verify),
# {m['draft_seq_s'] * 1e6:.0f} us per sequence per drafter pass;
# allocator op {m['alloc_op_s'] * 1e6:.2f} us; matmul half-rate rows {m['gemm_half_rows']:.1f};
# paged-attention KV gather {m['kv_gather_bw'] / 1e9:.2f} GB/s; verify attention products at
# {m['eta_attn'] * fp32 * 1e3:.1f} GFLOP/s{' after the gather' if m['attn_dense'] else ''}; elementwise passes
# {m['elementwise_s'] * 1e9:.2f} ns per activation element.
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
eta_attn: {m['eta_attn']:.4f}
elementwise_ns: {m['elementwise_s'] * 1e9:.4f}
attn_dense: {'true' if m['attn_dense'] else 'false'}
pass_overhead_us: {m['pass_s'] * 1e6:.1f}
multi_query_us: {m['multi_query_s'] * 1e6:.1f}
batch_query_us: {m['batch_query_s'] * 1e6:.1f}
draft_seq_us: {m['draft_seq_s'] * 1e6:.1f}
""" + _gemm_rows_yaml(m.get("gemm_rows"))


def _gemm_rows_yaml(table: dict | None) -> str:
    if not table:
        return ""
    lines = ["# matmul rate over M rows, fraction of the fp32 GEMM peak, per weight-matrix size in KiB:"]
    lines += ["gemm_rows:"] + [f"  {kib}: {curve}" for kib, curve in table.items()]
    return "\n".join(lines) + "\n"


def write_profile(m: dict, size_mb: int) -> str:
    """The profile YAML of figures `m` measured on this machine with `size_mb` MB probes."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    name = torch.cuda.get_device_name() if device == "cuda" else f"{os.cpu_count()}-core CPU"
    mem = (torch.cuda.get_device_properties(0).total_memory if device == "cuda"
           else os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")) / 1e9
    note = f"{time.strftime('%Y-%m-%d')}, {torch.get_num_threads()} threads, {size_mb} MB probes"
    return profile_yaml(m, name, mem, note)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m validation.calibrate", description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None, help="profile path (default traces/hardware/<device>-measured.yaml)")
    ap.add_argument("--size-mb", type=int, default=512)
    ap.add_argument("--gemm", type=int, default=1024)
    ap.add_argument("--repeats", type=int, default=7, help="rounds of every probe (the mean kept)")
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    m = measure(args.size_mb, args.gemm, args.repeats, device)
    out = args.out or ROOT / "traces" / "hardware" / f"{'gpu' if device == 'cuda' else 'cpu'}-measured.yaml"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(write_profile(m, args.size_mb))
    print(out.read_text())
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
