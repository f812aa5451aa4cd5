"""The SimPy executor end to end: determinism, the decode-run fast path, physics, memory pressure."""
import json
from pathlib import Path

import numpy as np
import pytest

from sim.cli import run_trace
from sim.simulator import simulate
from sim.workload import make_requests
from tests.helpers import make_trace

ROOT = Path(__file__).resolve().parents[1]


def run(trace, concurrency=None, fast=True):
    workload = make_requests(trace.workload, trace.seed, concurrency)
    return simulate(trace, trace.speculation[0], workload, fast=fast)


def test_same_seed_gives_byte_identical_report(tmp_path):
    trace = make_trace(tmp_path)
    docs = []
    for i in range(2):
        run_trace(trace, tmp_path / f"o{i}", progress=False)
        doc = json.loads((tmp_path / f"o{i}" / "report.json").read_text())
        assert "wall_clock" in doc
        del doc["wall_clock"]
        docs.append(json.dumps(doc))
        docs.append((tmp_path / f"o{i}" / "runs" / "none-open-steps.csv").read_bytes())
    assert docs[0] == docs[2] and docs[1] == docs[3]
    other = make_trace(tmp_path, seed=2)
    assert json.dumps(run_trace(other, None, progress=False)["runs"]) != docs[0]


@pytest.mark.parametrize("paging", ["naive", "indexshare"])
def test_decode_runs_equal_step_by_step(tmp_path, paging):
    trace = make_trace(tmp_path, serving={"paging": paging})
    fast, slow = run(trace, fast=True), run(trace, fast=False)
    fc, sc = fast.steps.columns(), slow.steps.columns()
    assert len(fc["time"]) == len(sc["time"]) > 100
    for col in ("batch_size", "query_tokens", "context_tokens", "page_allocs", "page_frees", "bound"):
        assert np.array_equal(fc[col], sc[col]), col
    for col in ("time", "duration", "flops", "bytes"):
        np.testing.assert_allclose(fc[col], sc[col], rtol=1e-9)
    assert fast.allocator == slow.allocator
    for a, b in zip(fast.seqs, slow.seqs):
        assert (a.steps, a.generated) == (b.steps, b.generated)
        assert a.finish == pytest.approx(b.finish, rel=1e-9)
    assert sum(1 for _ in fast.steps._blocks) < len(fc["time"])  # the fast path did batch steps


def test_every_request_finishes_with_exactly_its_tokens(tmp_path):
    trace = make_trace(tmp_path)
    res = run(trace)
    reqs = make_requests(trace.workload, trace.seed).requests
    assert [s.generated for s in res.seqs] == [r.output_tokens for r in reqs]
    assert all(s.finish >= s.first_token >= s.arrival for s in res.seqs)
    cols = res.steps.columns()
    assert np.all(np.diff(cols["time"]) > 0)
    assert res.allocator.page_allocs == res.allocator.page_frees  # every page came back


def test_tiny_pool_preempts_and_still_completes(tmp_path):
    trace = make_trace(tmp_path, serving={"kv_pages": 40, "max_num_seqs": 16},
                       workload={"arrival": {"process": "closed", "concurrency": 16}})
    res = run(trace)
    assert res.preemptions > 0
    reqs = make_requests(trace.workload, trace.seed).requests
    assert [s.generated for s in res.seqs] == [r.output_tokens for r in reqs]
    assert res.allocator.peak_pages <= 40


def test_closed_loop_keeps_concurrency(tmp_path):
    trace = make_trace(tmp_path, serving={"max_num_seqs": 64})
    res = run(trace, concurrency=4)
    cols = res.steps.columns()
    assert cols["batch_size"].max() == 4
    # while requests remain, exactly 4 are in flight: all but the tail steps run at batch 4
    assert np.mean(cols["batch_size"] == 4) > 0.5


def test_physics_llama8b_bandwidth_bound_at_1_toward_compute_at_256(tmp_path):
    trace = make_trace(tmp_path, model="llama-3.1-8b",
                       serving={"max_num_seqs": 256, "max_num_batched_tokens": 8192},
                       workload={"requests": 256, "prompt_tokens": {"dist": "fixed", "value": 512},
                                 "output_tokens": {"dist": "fixed", "value": 64}})
    report = run_trace(trace, None, progress=False)
    one = report["runs"][0]["summary"]
    res1 = run(trace, concurrency=1)
    decode = res1.steps.columns()
    decode_bound = decode["bound"][decode["query_tokens"] == 1]
    assert set(decode_bound) == {"memory"}
    from sim.metrics import summarize
    s1 = summarize(res1, trace)
    s256 = summarize(run(trace, concurrency=256), trace)
    assert 0.0015 < s1["decode_compute_utilization"] < 0.004  # ~0.3% of peak at batch 1
    assert s1["decode_bandwidth_utilization"] > 0.5
    assert s1["memory_bound_fraction"] > 0.9
    assert s256["decode_compute_utilization"] > 30 * s1["decode_compute_utilization"]
    assert s256["compute_utilization"] > 5 * s1["compute_utilization"]
    assert s256["throughput_tok_s"] > 20 * s1["throughput_tok_s"]
    assert one["completed"] == 256


def test_golden_report(tmp_path):
    """traces/golden-tiny.yaml's report equals the committed one (numbers to 1e-9, all else exact)."""
    from sim.spec import load_trace
    report = run_trace(load_trace(ROOT / "traces" / "golden-tiny.yaml"), tmp_path, progress=False)
    got = json.loads(json.dumps(report))
    want = json.loads((ROOT / "tests" / "golden" / "golden-tiny.json").read_text())
    want.pop("wall_clock", None)
    _same(got, want, "report")


def _same(a, b, path):
    if isinstance(b, dict):
        assert isinstance(a, dict) and a.keys() == b.keys(), path
        for k in b:
            _same(a[k], b[k], f"{path}.{k}")
    elif isinstance(b, list):
        assert isinstance(a, list) and len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{path}[{i}]")
    elif isinstance(b, float) and not isinstance(a, bool):
        assert a == pytest.approx(b, rel=1e-9, abs=1e-12), path
    else:
        assert a == b, path
