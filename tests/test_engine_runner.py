"""engine.runner / engine.cli: continuous batching on sim's Scheduler with real forward passes.

Greedy outputs are lossless across schemes, paging modes and preemption; IndexShare spares the
page allocator; bad engine sections exit 2 naming the key; the report has the simulator's schema.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from engine.cli import main, run_trace
from tests import helpers
from engine.ngram import NGramPlanner, propose
from sim.cli import run_trace as sim_run_trace
from sim.policy import BatchTable
from sim.report import REQUEST_COLUMNS
from sim.spec import load_trace
from sim.steplog import COLUMNS

TINY = {"random_shape": "llama-3.2-1b", "layers": 2, "hidden": 64, "heads": 4, "kv_heads": 2, "head_dim": 16,
        "ffn": 128, "vocab": 512}
BASE = {
    "version": 1, "name": "eng", "seed": 3, "hardware": "cpu", "model": "llama-3.2-1b",
    "serving": {"max_num_seqs": 4, "max_num_batched_tokens": 96, "page_size": 8, "kv_pages": 128,
                "paging": "indexshare"},
    "workload": {"requests": 6, "arrival": {"process": "closed", "concurrency": 3},
                 "prompt_tokens": {"dist": "uniform", "min": 8, "max": 60},
                 "output_tokens": {"dist": "uniform", "min": 6, "max": 40}, "temperature": 0.0},
    "speculation": [
        {"scheme": "none"},
        {"scheme": "ngram", "label": "ngram-naive", "paging": "naive", "k": 4, "acceptance": {"mean_accepted": 1.5}},
        {"scheme": "ngram", "label": "ngram-indexshare", "paging": "indexshare", "k": 4,
         "acceptance": {"mean_accepted": 1.5}},
    ],
    "engine": {"checkpoint": TINY, "backend": "torch", "device": "cpu"},
}


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def write_trace(tmp_path: Path, **overrides) -> Path:
    return helpers.write_trace(tmp_path, BASE, **overrides)


def summary(report, label):
    (run,) = [r for r in report["runs"] if r["label"] == label]
    return run["summary"]


def test_greedy_ngram_is_lossless_and_indexshare_spares_the_pool(tmp_path):
    report, res = run_trace(load_trace(write_trace(tmp_path)), None, progress=False)
    base = res["none-open"].tokens  # no sweep: the workload's own closed loop
    for label in ("ngram-naive", "ngram-indexshare"):
        tag = next(t for t in res if t.startswith(label + "-"))
        assert res[tag].tokens == base, f"{label} changed the greedy output"
    s_naive, s_is = summary(report, "ngram-naive"), summary(report, "ngram-indexshare")
    assert s_naive["mean_accepted_tokens"] > 1.05  # drafts were accepted: the check is not vacuous
    assert s_naive["output_tokens"] == s_is["output_tokens"] == summary(report, "none")["output_tokens"]
    a_naive, a_is = s_naive["allocator"], s_is["allocator"]
    assert a_naive["kv_copy_bytes"] == a_is["kv_copy_bytes"] == 0  # chains never copy
    assert a_is["page_allocs"] + a_is["page_frees"] < a_naive["page_allocs"] + a_naive["page_frees"]
    assert a_is["ops_per_token"] < a_naive["ops_per_token"]
    for r in res.values():
        for s in r.result.seqs:
            assert len(r.tokens[s.id]) == s.output
    # sequence-steps that could draft and did: prompt lookup finds no match on some of them
    r = res[next(t for t in res if t.startswith("ngram-naive-"))]
    assert 0 < r.drafted < r.draftable and r.drafted == sum(r.result.acceptance.values())
    assert res["none-open"].draftable == 0
    # the same per request: each request's drafted steps are its acceptance counts' steps
    assert sum(n for n, _ in r.tries.values()) == r.draftable and sum(d for _, d in r.tries.values()) == r.drafted
    assert all(d == sum(r.by_request[rid][0].values()) and d <= n for rid, (n, d) in r.tries.items())
    assert not res["none-open"].tries


def test_tiny_pool_preempts_recomputes_and_stays_lossless(tmp_path):
    spec = [{"scheme": "none"}, {"scheme": "ngram", "k": 3, "acceptance": {"mean_accepted": 1.5}}]
    big = run_trace(load_trace(write_trace(tmp_path, name="big", speculation=spec)), None, progress=False)[1]
    small_path = write_trace(tmp_path, name="small", speculation=spec,
                             serving={"kv_pages": 14, "max_num_seqs": 4})
    report, small = run_trace(load_trace(small_path), None, progress=False)
    assert sum(summary(report, lab)["allocator"]["preemptions"] for lab in ("none", "ngram")) > 0
    for tag, r in small.items():
        for s in r.result.seqs:
            assert len(r.tokens[s.id]) == s.output and s.finish is not None
        assert r.tokens == big[tag].tokens, f"{tag}: recompute after preemption changed the output"


def test_sampling_is_seeded_per_run(tmp_path):
    """Closed loop: the schedule does not depend on the clock, so a seeded run repeats exactly."""
    path = write_trace(tmp_path, name="hot", speculation=[{"scheme": "none"},
                       {"scheme": "ngram", "k": 3, "acceptance": {"mean_accepted": 1.5}}],
                       workload={"temperature": 0.8, "requests": 5})
    trace = load_trace(path)
    _, res1 = run_trace(trace, None, progress=False)
    _, res2 = run_trace(trace, None, progress=False)
    for tag in res1:
        assert res1[tag].tokens == res2[tag].tokens
        for s in res1[tag].result.seqs:
            assert len(res1[tag].tokens[s.id]) == s.output
    assert res1["none-open"].tokens != res1["ngram-open"].tokens  # different random streams, same law


def test_open_loop_clock_and_greedy_output_independent_of_batching(tmp_path):
    spec = [{"scheme": "none"}, {"scheme": "ngram", "k": 3, "acceptance": {"mean_accepted": 1.5}}]
    closed = run_trace(load_trace(write_trace(tmp_path, name="closed", speculation=spec)), None,
                       progress=False)[1]
    path = write_trace(tmp_path, name="open", speculation=spec,
                       workload={"arrival": {"process": "poisson", "rate_per_s": 100.0}})
    report, res = run_trace(load_trace(path), None, progress=False)
    assert set(res) == {"none-open", "ngram-open"}
    for label in ("none", "ngram"):
        r = res[f"{label}-open"]
        assert r.tokens == closed[f"{label}-open"].tokens
        for s in r.result.seqs:
            assert s.first_token > s.arrival and s.finish >= s.first_token
        times = r.result.steps.columns()["time"]
        durations = r.result.steps.columns()["duration"]
        assert (times[1:] >= times[:-1] + durations[:-1] - 1e-12).all()  # steps never overlap
        assert r.result.duration >= max(s.arrival for s in r.result.seqs)
    for run in report["runs"]:
        assert run["concurrency"] is None and run["summary"]["completed"] == 6


def test_report_has_the_simulator_schema_and_tokens_files(tmp_path):
    path = write_trace(tmp_path, name="rep", sweep={"concurrency": [1, 2]},
                       workload={"requests": 3})
    out = tmp_path / "out"
    assert main(["run", str(path), "--out", str(out), "--save-tokens", "--no-progress", "--quiet"]) == 0
    rep = json.loads((out / "report.json").read_text())
    sim = sim_run_trace(load_trace(path), None, progress=False)
    assert rep["producer"] == "engine" and sim["producer"] == "sim"
    assert set(sim) <= set(rep)
    assert len(rep["runs"]) == len(sim["runs"]) == 6
    for e, s in zip(rep["runs"], sim["runs"]):
        assert set(e) == set(s) and set(e["summary"]) == set(s["summary"])
        assert set(e["summary"]["allocator"]) == set(s["summary"]["allocator"])
        assert (e["label"], e["concurrency"]) == (s["label"], s["concurrency"])
        steps = (out / e["per_step"]).read_text().splitlines()
        assert steps[0].split(",") == list(COLUMNS) and len(steps) - 1 == e["summary"]["steps"]
        reqs = (out / e["per_request"]).read_text().splitlines()
        assert reqs[0].split(",") == list(REQUEST_COLUMNS) and len(reqs) == 4
        tok = out / e["per_request"].replace("-requests.csv", "-tokens.jsonl")
        rows = [json.loads(line) for line in tok.read_text().splitlines()]
        assert [r["id"] for r in rows] == [0, 1, 2]
        outs = [int(line.split(",")[REQUEST_COLUMNS.index("output_tokens")]) for line in reqs[1:]]
        assert [len(r["tokens"]) for r in rows] == outs
    assert rep["model"]["layers"] == 2 and rep["model"]["hidden"] == 64  # the model actually run
    assert rep["engine"]["backend"] == "torch" and rep["engine"]["device"] == "cpu"


@pytest.mark.parametrize("engine,key", [
    ({"checkpoint": "tiny-llama"}, "engine.checkpoint"),
    ({"checkpoint": {**TINY, "bogus": 1}}, "engine.checkpoint.bogus"),
    ({"checkpoint": {**TINY, "random_shape": "deepseek-v3"}}, "engine.checkpoint.random_shape"),
    ({"checkpoint": {**TINY, "heads": 3}}, "engine.checkpoint"),
    ({"checkpoint": TINY, "backend": "cuda-graphs"}, "engine.backend"),
    ({"checkpoint": TINY, "device": "tpu"}, "engine.device"),
])
def test_bad_engine_sections_exit_2(tmp_path, capsys, engine, key):
    path = write_trace(tmp_path, engine=engine)
    assert main(["run", str(path), "--out", str(tmp_path / "o"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert f"{key}:" in err and "Traceback" not in err


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present")
def test_cuda_without_gpu_exits_2(tmp_path, capsys):
    path = write_trace(tmp_path, engine={"checkpoint": TINY, "device": "cuda"})
    assert main(["run", str(path), "--no-progress"]) == 2
    assert "engine.device:" in capsys.readouterr().err


def test_more_mtp_modules_than_the_model_has_exits_2(tmp_path, capsys):
    path = write_trace(tmp_path, speculation=[{"scheme": "none"},
                                              {"scheme": "mtp", "depth": 3, "acceptance": {"per_depth": [0.8]}}])
    assert main(["run", str(path), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "speculation[1].depth:" in err and "2 MTP module(s)" in err and "Traceback" not in err


def test_medusa_with_its_own_lm_heads_exits_2(tmp_path, capsys):
    """The engine's Medusa heads read the target's LM head; a trace that prices one per head
    (`lm_head: own`, the default) would compare unlike things."""
    path = write_trace(tmp_path, speculation=[{"scheme": "none"}, {"scheme": "medusa", "heads": 2}])
    assert main(["run", str(path), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "speculation[1].lm_head:" in err and "lm_head: shared" in err and "Traceback" not in err


def test_prompt_lookup():
    assert propose([1, 2, 3, 9, 1, 2, 3], 3, 3) == [9, 1, 2]
    assert propose([5, 1, 2, 7, 1, 2], 2, 3) == [7, 1]  # longest suffix match: the bigram 1 2
    assert propose([4, 4, 4], 5, 2) == [4, 4, 4, 4, 4]  # a loop continues into the proposal
    assert propose([1, 2, 3], 3, 3) == []
    assert propose([7, 1, 7, 2, 7], 1, 1) == [2]  # the most recent earlier occurrence


def test_planner_honours_policy_and_remaining():
    class Seq:
        def __init__(self, id, remaining, computed=10):
            self.id, self.remaining, self.computed = id, remaining, computed

    class Scheme:
        policy = BatchTable(((1, 1, 5), (2, None, 2)))
        max_ngram = 2
        node = None

    tokens = {0: [3, 4, 5] * 6, 1: [8, 9] * 8, 2: [1, 2, 3]}
    planner = NGramPlanner(Scheme(), tokens)
    (p,) = planner.plan([Seq(0, 100)])
    assert len(p.tokens) == 5 and p.parents == (-1, 0, 1, 2, 3)
    plans = planner.plan([Seq(0, 100), Seq(1, 2), Seq(2, 50)])
    assert len(plans[0].tokens) == 2  # batch of 3: depth 2
    assert len(plans[1].tokens) == 1  # never past remaining - 1
    assert plans[2] is None  # no match
    assert planner.plan([Seq(1, 1)]) == [None]


def test_default_checkpoint_is_the_trace_model_cut_to_two_layers(tmp_path):
    from engine.checkpoint import resolve
    doc = {k: v for k, v in BASE.items() if k != "engine"}
    path = tmp_path / "default.yaml"
    path.write_text(yaml.safe_dump(doc))
    src = resolve(load_trace(path))
    assert src.spec.layers == 2 and src.spec.hidden == 2048 and src.spec.vocab == 128256
    assert src.spec.bytes_per_weight == 4 and src.seed == BASE["seed"]
    if not torch.cuda.is_available():
        assert (src.device, src.backend) == ("cpu", "torch")
    custom = resolve(load_trace(write_trace(tmp_path, name="c", engine={"checkpoint": {**TINY, "seed": 9}})))
    assert (custom.spec.layers, custom.spec.hidden, custom.spec.heads, custom.seed) == (2, 64, 4, 9)
    assert custom.spec.ffn == 128 and custom.spec.tied_embeddings  # a key left out keeps the preset's value


def test_the_host_reference_runs_outside_the_engines_clock(tmp_path):
    """A reference call after every step returns the seconds it timed (EngineResult.reference_speed:
    their inverses, weighted by the steps' durations) and is never counted in the engine's clock."""
    import time

    from engine.checkpoint import resolve
    from engine.runner import run_scheme
    from sim.workload import make_requests
    trace = load_trace(write_trace(tmp_path))
    source = resolve(trace)
    model = source.build()
    wl = make_requests(trace.workload, trace.seed)
    plain = run_scheme(trace, trace.speculation[0], wl, model, prompts=source.prompts)
    seen: list[int] = []
    timed = run_scheme(trace, trace.speculation[0], wl, model, prompts=source.prompts,
                       reference=lambda: (time.sleep(0.02), 0.02 if len(seen) % 2 else 0.05, seen.append(1))[1])
    steps = plain.result.steps.columns()["duration"].size
    d = timed.result.steps.columns()["duration"]  # (steps,) seconds: every other step read 0.02 s, the rest 0.05
    speeds = np.where(np.arange(d.size) % 2, 50.0, 20.0)
    assert plain.reference_speed is None
    assert timed.reference_speed == pytest.approx(float((d * speeds).sum() / d.sum()))
    assert timed.result.duration < plain.result.duration + steps * 0.01  # 20 ms a step would show
    assert timed.tokens == plain.tokens


def test_the_engine_times_its_steps_and_drafting_on_the_clock_it_is_given(tmp_path):
    """A run given a clock (validation.traffic: a probe's, which leaves out the memory traffic it
    adds around each pass) reads every step's duration and its planner's drafting time off it: on
    a clock that moves one second a reading, a step reads one second, and three where the planner
    ran (its two readings of its drafting, which reads one)."""
    import itertools

    from engine.checkpoint import resolve
    from engine.runner import run_scheme
    from sim.workload import make_requests
    trace = load_trace(write_trace(tmp_path))
    source = resolve(trace)
    model = source.build()
    wl = make_requests(trace.workload, trace.seed)
    ticks = itertools.count()
    res = run_scheme(trace, trace.speculation[2], wl, model, prompts=source.prompts, clock=lambda: float(next(ticks)))
    cols = res.result.steps.columns()
    planned = cols["draft_time"] > 0
    assert planned.sum() > 1 and set(cols["draft_time"][planned]) == {1.0}
    assert set(cols["duration"][planned]) == {3.0} and set(cols["duration"][~planned]) == {1.0}


def test_a_feature_drafters_hand_off_is_timed_as_drafting(tmp_path):
    """The target's features handed to a drafter that takes them (MTP here) count as the step's
    drafting, as the simulator's drafter price counts them (draft_seq_us is measured on whole MTP
    steps): on a clock that moves one second a reading, the plan call and the hand-off read one
    second each, and the step five."""
    import itertools

    from engine.checkpoint import resolve
    from engine.runner import run_scheme
    from sim.workload import make_requests
    trace = load_trace(write_trace(tmp_path, speculation=[{"scheme": "mtp", "depth": 1,
                                                           "acceptance": {"per_depth": [0.5]}}]))
    source = resolve(trace)
    model = source.build()
    drafters = source.drafters_for(model, trace.speculation)
    ticks = itertools.count()
    res = run_scheme(trace, trace.speculation[0], make_requests(trace.workload, trace.seed), model,
                     prompts=source.prompts, drafters=drafters, clock=lambda: float(next(ticks)))
    cols = res.result.steps.columns()
    handed = cols["draft_time"] == 2.0
    assert handed.sum() > 0.9 * len(handed)
    assert set(cols["duration"][handed]) == {5.0}


def test_group_rows_views_back_to_back_rows_and_copies_others():
    """A verification group's logit rows: a view of the logits where the sequences' rows lie
    back to back (no copy), a copy otherwise; both equal stacking the rows."""
    from engine.runner import group_rows
    logits = torch.randn(12, 5)  # (R, V)
    for starts, width, view in (([0, 3, 6], 3, True), ([4], 4, True), ([0, 4, 8], 3, False), ([6, 0], 3, False)):
        got = group_rows(logits, starts, width)  # (G, width, V)
        want = torch.stack([logits[s:s + width] for s in starts])
        assert torch.equal(got, want)
        assert (got.data_ptr() == logits[starts[0]].data_ptr()) == view
