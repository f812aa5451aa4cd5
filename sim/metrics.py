"""Run summaries (DESIGN.md §5): latency percentiles, throughput, utilisation, allocator figures."""
from __future__ import annotations

import numpy as np

from sim.simulator import RunResult
from sim.spec import TraceSpec
from sim.cost import compute_dtype

PCTS = {"p50": 50, "p90": 90, "p99": 99}


def dist(values: np.ndarray) -> dict:
    if len(values) == 0:
        return {"mean": None, **{k: None for k in PCTS}}
    out = {"mean": float(np.mean(values))}
    out.update({k: float(v) for k, v in zip(PCTS, np.percentile(values, list(PCTS.values())))})
    return out


def request_arrays(result: RunResult) -> dict[str, np.ndarray]:
    seqs = result.seqs
    f = lambda attr: np.fromiter((getattr(s, attr) for s in seqs), dtype=np.float64, count=len(seqs))  # noqa: E731
    return {"id": f("id"), "arrival": f("arrival"), "first_token": f("first_token"), "finish": f("finish"),
            "prompt_tokens": f("prompt"), "output_tokens": f("output"), "steps": f("steps"),
            "preemptions": f("preemptions")}


def latencies(r: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(TTFT per request, TPOT per request with more than one output token) from request_arrays."""
    out_tok = r["output_tokens"]
    multi = out_tok > 1
    return r["first_token"] - r["arrival"], (r["finish"][multi] - r["first_token"][multi]) / (out_tok[multi] - 1)


def summarize(result: RunResult, trace: TraceSpec) -> dict:
    r = request_arrays(result)
    cols = result.steps.columns()
    out_tok = r["output_tokens"]
    ttft, tpot = latencies(r)
    multi = out_tok > 1
    e2e = r["finish"] - r["arrival"]
    duration = result.duration
    busy = float(cols["duration"].sum())
    dec = cols["prefill_tokens"] == 0
    dec_busy = float(cols["duration"][dec].sum())
    hw = trace.hardware
    peak = hw.peak(compute_dtype(trace.model))  # per device: step FLOPs and bytes are one device's share
    st = result.allocator
    total_out = int(out_tok.sum())
    kv_tokens = int((r["prompt_tokens"] + out_tok).sum())
    slo = trace.slo
    ok = np.ones(len(ttft), dtype=bool)
    if slo.ttft_p99_s is not None:
        ok &= ttft <= slo.ttft_p99_s
    if slo.tpot_p99_s is not None:
        tp_all = np.where(multi, (r["finish"] - r["first_token"]) / np.maximum(out_tok - 1, 1), 0.0)
        ok &= tp_all <= slo.tpot_p99_s
    return {
        "requests": len(r["id"]),
        "completed": int(np.isfinite(r["finish"]).sum()),
        "output_tokens": total_out,
        "duration_s": duration,
        "throughput_tok_s": total_out / duration if duration > 0 else 0.0,
        "request_throughput_rps": len(r["id"]) / duration if duration > 0 else 0.0,
        "ttft_s": dist(ttft),
        "tpot_s": dist(tpot),
        "e2e_s": dist(e2e),
        "mean_accepted_tokens": result.decode_tokens / result.decode_seq_steps if result.decode_seq_steps else 1.0,
        "steps": len(cols["time"]),
        "draft_s": float(cols["draft_time"].sum()),  # of the busy time, the drafter's (per-step draft_time)
        "mean_batch_size": float(cols["batch_size"].mean()) if len(cols["time"]) else 0.0,
        "compute_utilization": float(cols["flops"].sum() / (busy * peak)) if busy else 0.0,
        "bandwidth_utilization": float(cols["bytes"].sum() / (busy * hw.mem_bw)) if busy else 0.0,
        # the same over steps without prefill work: the decode roofline position
        "decode_compute_utilization": float(cols["flops"][dec].sum() / (dec_busy * peak)) if dec_busy else 0.0,
        "decode_bandwidth_utilization": float(cols["bytes"][dec].sum() / (dec_busy * hw.mem_bw)) if dec_busy else 0.0,
        "decode_arithmetic_intensity": float(cols["flops"][dec].sum() / cols["bytes"][dec].sum()) if dec.any() else None,
        "memory_bound_fraction": float(cols["duration"][cols["bound"] == "memory"].sum() / busy) if busy else 0.0,
        "slo_attainment": float(ok.mean()) if len(ok) else 0.0,
        "speedup_vs_baseline": None,  # filled by the report, which knows the baseline run
        "allocator": {
            "page_allocs": st.page_allocs,
            "page_frees": st.page_frees,
            "ops_per_token": (st.page_allocs + st.page_frees) / total_out if total_out else 0.0,
            # pages taken per token written to the KV cache (prompt and output): ~1/page_size when
            # speculation does not churn the pool
            "allocs_per_kv_token": st.page_allocs / kv_tokens if kv_tokens else 0.0,
            "kv_copy_bytes": st.kv_copy_bytes,
            "peak_pages": st.peak_pages,
            "preemptions": result.preemptions,
        },
    }
