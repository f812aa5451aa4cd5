"""Speculative schemes in the simulator: parsing and errors, policies, paging under speculation,
drafter pricing, and the physics of the concurrency ceiling."""
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import yaml

from sim.cli import main, run_trace
from sim.drafters import PassPricer, eagle_head
from sim.errors import SpecError
from sim.policy import BatchTable
from sim.simulator import simulate
from sim.speculation import Speculator
from sim.workload import make_requests
from tests.helpers import make_trace

ROOT = Path(__file__).resolve().parents[1]

EAGLE = {"scheme": "eagle", "depth": 4, "acceptance": {"per_depth": [0.8, 0.75, 0.7, 0.65]}}
EAGLE2 = {"scheme": "eagle2", "depth": 5, "topk": 6, "tree_tokens": 30, "acceptance": {"confidence": {"top1_mean": 0.6}}}
ALL = [{"scheme": "none"}, EAGLE, EAGLE2,
       {"scheme": "medusa", "heads": 3, "tree": 20, "acceptance": {"rank_depth": [[0.6, 0.1, 0.05], [0.4, 0.1], [0.3, 0.1]]}},
       {"scheme": "mtp", "depth": 2, "acceptance": {"per_depth": [0.85, 0.7]}},
       {"scheme": "draft", "k": 3, "draft_model": {"preset": "llama-3.2-1b", "layers": 2}, "acceptance": {"mean_accepted": 2.5}},
       {"scheme": "ngram", "k": 3, "acceptance": {"per_depth": [0.5, 0.4, 0.3]}}]

# requests that differ: a quarter of them predictable, the rest not
MIXED = {**EAGLE, "label": "mixed", "acceptance": {"mixture": [{"weight": 1, "per_depth": [0.95, 0.9]},
                                                                {"weight": 3, "per_depth": [0.3]}]}}
MIXED2 = {**EAGLE2, "label": "mixed2", "acceptance": {"mixture": [{"weight": 1, "confidence": {"top1_mean": 0.85}},
                                                                  {"weight": 1, "confidence": {"top1_mean": 0.3}}]}}


def run(trace, i, concurrency=None):
    return simulate(trace, trace.speculation[i], make_requests(trace.workload, trace.seed, concurrency))


def test_every_scheme_runs_and_completes_exactly(tmp_path):
    trace = make_trace(tmp_path, speculation=ALL)
    want = [r.output_tokens for r in make_requests(trace.workload, trace.seed).requests]
    for i, scheme in enumerate(trace.speculation):
        res = run(trace, i)
        assert [s.generated for s in res.seqs] == want, scheme.label
        tok_step = res.decode_tokens / res.decode_seq_steps
        assert tok_step == 1.0 if scheme.name == "none" else tok_step > 1.2


@pytest.mark.parametrize("entry,path,needle", [
    ({**EAGLE, "acceptance": {"per_depth": [0.8, 1.2]}}, "speculation[1].acceptance.per_depth[1]", "<= 1"),
    ({**EAGLE, "depth": 0}, "speculation[1].depth", ">= 1"),
    ({**EAGLE2, "tree_tokens": 200}, "speculation[1].tree_tokens", "larger than its budget"),
    ({"scheme": "draft", "k": 3, "draft_model": "llama-3.1-70b", "acceptance": {"per_depth": [0.7]}},
     "speculation[1].draft_model", "smaller than its target"),
    ({**EAGLE, "acceptance": {"mean_accepted": 7}}, "speculation[1].acceptance.mean_accepted", "at most depth + 1"),
    ({**EAGLE, "acceptance": {"rank_depth": [[0.7, 0.5]]}}, "speculation[1].acceptance.rank_depth[0]", "sum to at most 1"),
    ({**EAGLE, "acceptance": {"profile": "nope"}}, "speculation[1].acceptance.profile", "unknown acceptance profile"),
    ({**EAGLE, "policy": {"batch_table": {"1-16": 3, "10-": 1}}}, "speculation[1].policy.batch_table", "overlap"),
    ({**EAGLE, "policy": {"batch_table": {"x": 3}}}, "speculation[1].policy.batch_table.x", "range"),
    ({"scheme": "medusa", "heads": 2, "tree": 50, "acceptance": {"rank_depth": [[0.5, 0.2], [0.4]]}},
     "speculation[1].tree", "larger than its budget"),
    ({"scheme": "warp", "k": 2}, "speculation[1].scheme", "expected one of"),
])
def test_bad_scheme_parameters_are_clean_errors(tmp_path, capsys, entry, path, needle):
    from tests.helpers import BASE
    doc = {**BASE, "speculation": [{"scheme": "none"}, entry]}
    f = tmp_path / "bad.yaml"
    f.write_text(yaml.safe_dump(doc))
    assert main(["run", str(f), "--out", str(tmp_path / "o"), "--quiet", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert f"{path}:" in err and needle in err and "Traceback" not in err


def test_missing_acceptance_is_a_clean_error_when_simulating(tmp_path, capsys):
    from tests.helpers import BASE
    f = tmp_path / "t.yaml"
    f.write_text(yaml.safe_dump({**BASE, "speculation": [{"scheme": "eagle", "depth": 2}]}))
    assert main(["run", str(f), "--out", str(tmp_path / "o"), "--quiet", "--no-progress"]) == 2
    assert "speculation[0].acceptance: missing" in capsys.readouterr().err


def test_batch_table_policy():
    table = BatchTable(((1, 16, 3), (17, 64, 2), (65, None, 0)))
    assert [table.choose(b, 0) for b in (1, 16, 17, 64, 65, 1000)] == [3, 3, 2, 2, 0, 0]


def test_goodput_drafts_deep_when_idle_and_stops_when_compute_bound(tmp_path):
    trace = make_trace(tmp_path, model="llama-3.1-8b", speculation=[
        {"scheme": "eagle2", "depth": 6, "topk": 10, "tree_tokens": 60, "policy": "goodput",
         "acceptance": {"profile": "eagle2-llama31-8b-mtbench"}}])
    spec = Speculator(trace.speculation[0], trace, seed=1)
    assert spec.policy.choose(1, 500) >= 4  # weights dominate: verifying a tree is nearly free
    assert spec.policy.choose(256, 500) <= 2  # compute-bound: a 60-token tree per sequence does not pay
    # the choice maximises predicted goodput among all depths
    for b in (1, 16, 256):
        d = spec.policy.choose(b, 500)
        rates = [spec.policy.rate(b, 640, k) for k in range(7)]
        assert rates[d] == max(rates)


def test_naive_paging_churns_and_copies_indexshare_does_not(tmp_path):
    """Same seed, same accepted paths: naive pays page churn and tree-path copies in step time."""
    entries = [{**EAGLE2, "label": "naive", "paging": "naive"}, {**EAGLE2, "label": "indexshare", "paging": "indexshare"}]
    trace = make_trace(tmp_path, speculation=entries,  # short prompts: decoding's page traffic dominates
                       workload={"arrival": {"process": "closed", "concurrency": 4},  # batches independent of time
                                 "prompt_tokens": {"dist": "uniform", "min": 8, "max": 64},
                                 "output_tokens": {"dist": "uniform", "min": 100, "max": 200}})
    naive, share = run(trace, 0), run(trace, 1)
    sn, ss = naive.allocator, share.allocator
    assert ss.kv_copy_bytes == 0 and sn.kv_copy_bytes > 0
    assert ss.page_allocs + ss.page_frees < 0.5 * (sn.page_allocs + sn.page_frees)
    cn, cs = naive.steps.columns(), share.steps.columns()
    assert len(cn["time"]) == len(cs["time"])  # acceptance draws did not depend on paging
    assert np.array_equal(cn["accepted"], cs["accepted"])
    assert np.all(cn["duration"] >= cs["duration"] - 1e-15)
    assert cn["duration"].sum() > cs["duration"].sum()
    tokens = sum(s.prompt + s.output for s in share.seqs)
    assert ss.page_allocs / tokens == pytest.approx(1 / 16, rel=0.25)  # ~1/page_size per committed token


def test_speedup_falls_with_concurrency_and_survives_long_context(tmp_path):
    base = dict(model="llama-3.1-8b", serving={"max_num_seqs": 256, "max_num_batched_tokens": 32768},
                speculation=[{"scheme": "none"}, {"scheme": "eagle2", "depth": 6, "topk": 10, "tree_tokens": 60,
                                                  "acceptance": {"profile": "eagle2-llama31-8b-mtbench"}}],
                sweep={"concurrency": [1, 64]})
    short = make_trace(tmp_path, **base, workload={"requests": 64, "prompt_tokens": {"dist": "fixed", "value": 256},
                                                   "output_tokens": {"dist": "fixed", "value": 64}})
    rep = run_trace(short, None, progress=False)
    sp = {(r["label"], r["concurrency"]): r["summary"]["speedup_vs_baseline"] for r in rep["runs"]}
    assert sp[("eagle2", 1)] > 1.8 and sp[("eagle2", 64)] < 1.0
    assert sp[("none", 1)] == 1.0


@pytest.mark.parametrize("hardware", [None, {"preset": "cpu", "attn_dense": True, "eta_attn": 0.3,
                                              "multi_query_us": 200.0, "batch_query_us": 150.0,
                                              "mixed_query_us": 120.0, "fused_query_us": 3.0, "fused_key_ns": 40.0,
                                              "kv_sizes": [[1, 0.9], [64, 0.6], [2048, 0.3]],
                                              "elementwise_sizes": [[0.1, 1.0], [100, 3.0]]},
                                      {"preset": "cpu", "attn_dense": True, "fused_key_ns": 40.0, "mixed_query_us": 120.0,
                                       "kv_decode": {"8x4x128": [[1, 0.5], [64, 0.2], [2048, 0.1]]},
                                       "fused_rows": {1: [[2, 90.0], [3, 120.0], [4, 60.0], [16, 30.0]],
                                                      64: [[2, 120.0], [4, 80.0], [8, 100.0]]},
                                       "fused_own": {0.5: [[2, 150.0], [8, 70.0], [512, 20.0]]},
                                       "verify_seqs": {2: [[4, 10.0], [16, 20.0]], 6: [[4, 30.0], [64, 15.0]]}},
                                      {"preset": "cpu", "attn_dense": True, "fused_key_ns": 40.0,
                                       "kv_sizes": [[1, 0.9], [64, 0.6], [2048, 0.3]],
                                       "kv_decode": {"8x4x128": [[1, 0.5], [64, 0.2], [2048, 0.1]]}}])
@pytest.mark.parametrize("kind", ["chain", "levels", "catch_up"])
def test_passpricer_compiled_equals_direct(tmp_path, hardware, kind):
    """Also on a CPU-like profile: attention's roofs added (attn_dense), query host terms, the
    fused attention's terms of catch-up passes (mixed, per query and per key: linear in the
    context), the gather's and the elementwise passes' rates by size (the gather's is not linear
    in the context, which the compiled form otherwise assumes), and the decoding sequences'
    gather on the geometry's own decode curve, with or without kv_sizes beside it; and the fused
    call's per-key part by the catch-up sequences' rows (fused_rows), and a lone one's or a
    long one's in a call of its own (fused_own), and the group calls' sequences' (verify_seqs)."""
    trace = make_trace(tmp_path, model="llama-3.1-8b", **({"hardware": hardware} if hardware else {}))
    p = PassPricer(eagle_head(trace.model), trace.hardware, 1, fuse_input=True, tree_levels=kind == "levels",
                   catch_up=kind == "catch_up")
    for n, ctx, toks in [(3, 1800, [3, 30, 30, 30]), (64, 64 * 4000, [64] + [640] * 5), (1, 10, [1]),
                         (1, 500, [1, 8, 8]), (3, 1800, [(14, 3), 30, 30]), (2, 900, [(300, 2), (5, 4)]),
                         (4, 2000, [(7, 4, 3), (11, 8, 4)]), (16, 9000, [(16, 16, 0), (30, 32, 14), 32])]:
        a, b = p(n, ctx, toks), p.direct(n, ctx, toks)
        for x, y in zip(a, b):
            assert x == pytest.approx(y, rel=1e-9)


def test_speculative_report_is_deterministic(tmp_path):
    trace = make_trace(tmp_path, speculation=[{"scheme": "none"}, EAGLE2])
    a = run_trace(trace, None, progress=False)
    b = run_trace(trace, None, progress=False)
    assert json.dumps(a) == json.dumps(b)


@pytest.mark.parametrize("paging", ["naive", "indexshare"])
@pytest.mark.parametrize("arrival", [{"process": "poisson", "rate_per_s": 30.0}, {"process": "closed", "concurrency": 6}])
def test_speculative_runs_equal_step_by_step(tmp_path, paging, arrival):
    """The fast path repeats steady speculative steps without rescheduling; every row, draw and
    request outcome must equal stepping through schedule -> price -> commit one at a time."""
    trace = make_trace(tmp_path, serving={"paging": paging, "max_num_batched_tokens": 2048},
                       hardware={"preset": "h100-sxm", "multi_query_us": 20, "batch_query_us": 10,
                                 "attn_dense": True,  # the reference's padded calls (Work.group_pad, decode_pad)
                                 "mixed_query_us": 30,  # the host terms of several- and mixed-query passes
                                 "verify_call_us": 40, "tree_call_us": 20, "tree_node_us": 1, "pack_node_us": 0.5,
                                 "fused_query_us": 0.3, "fused_key_ns": 7.0,
                                 # per-size gather and elementwise rates (log-interpolated by each step's size)
                                 "kv_sizes": [[0.5, 0.9], [64, 0.5]], "elementwise_sizes": [[0.01, 0.01], [10, 0.05]]},
                       workload={"arrival": arrival, "requests": 30,
                                 "output_tokens": {"dist": "uniform", "min": 20, "max": 120}},
                       speculation=[EAGLE2, EAGLE, ALL[3], {**EAGLE, "label": "table", "policy": {
                           "batch_table": {"1-2": 4, "3-": 2}}}, {**ALL[6], "match": 0.6},
                                                MIXED, MIXED2, {"scheme": "ngram", "label": "mixed-ngram", "k": 2, "match": 0.7,
                                                                "acceptance": MIXED["acceptance"]}])
    wl = make_requests(trace.workload, trace.seed)
    for scheme in trace.speculation:
        fast = simulate(trace, scheme, wl, fast=True)
        slow = simulate(trace, scheme, wl, fast=False)
        fc, sc = fast.steps.columns(), slow.steps.columns()
        for col in fc:
            assert np.array_equal(fc[col], sc[col]), (scheme.label, col)
        assert [(s.first_token, s.finish, s.steps) for s in fast.seqs] == [(s.first_token, s.finish, s.steps) for s in slow.seqs]
        assert fast.allocator == slow.allocator
        assert (fast.decode_seq_steps, fast.decode_tokens) == (slow.decode_seq_steps, slow.decode_tokens)
        assert fast.acceptance == slow.acceptance and sum(fast.acceptance.values()) > 0


def closed_runs(tmp_path, field: str, values, scheme: dict, requests: int):
    """(trace, [step columns]) of one scheme at concurrency 6, closed loop, on h100-sxm with the
    hardware `field` at each of `values` (the steps and draws are the same for every value)."""
    cols = []
    for v in values:
        trace = make_trace(tmp_path, hardware={"preset": "h100-sxm", field: v},
                           workload={"arrival": {"process": "closed", "concurrency": 6}, "requests": requests},
                           speculation=[scheme])
        cols.append(simulate(trace, trace.speculation[0], make_requests(trace.workload, trace.seed)).steps.columns())
    return trace, cols


def test_mixed_passes_pay_mixed_query_per_layer(tmp_path):
    """A step in which some sequences run one query token (drafted nothing, or decode beside a
    prefill chunk) and others several pays mixed_query_us per layer, and no other step does.
    Closed loop, so the steps and draws are the same with and without it."""
    ngram = {"scheme": "ngram", "k": 3, "acceptance": {"per_depth": [0.5, 0.4, 0.3]}}
    trace, (a, b) = closed_runs(tmp_path, "mixed_query_us", (0.0, 100.0), ngram, 20)
    assert np.array_equal(a["query_tokens"], b["query_tokens"]) and np.array_equal(a["batch_size"], b["batch_size"])
    extra = b["duration"] - a["duration"]
    layers = trace.model.layers
    paid = np.isclose(extra, layers * 100e-6, rtol=1e-6, atol=0)
    assert np.all(paid | np.isclose(extra, 0.0, atol=1e-12))
    several = a["query_tokens"] > a["batch_size"]
    assert paid.any() and not (paid & ~several).any()  # only where some sequence has several queries
    assert (several & ~paid & (a["batch_size"] > 1)).any()  # and not where all of them have


def test_steps_pay_fused_query_per_query_token_of_sequences_with_several(tmp_path):
    """fused_query_us per query token of the sequences with several (verifying drafts, or a
    prefill chunk), per head and layer: a step in which every sequence drafts pays it for all its
    query tokens, a step in which none drafts or prefills nothing, prompt lookup's steps, in
    which some find no match, for part of them, and a step with a prefill chunk for the chunk at
    least. Closed loop, so the steps and draws are the same either way. EAGLE's head (one layer)
    pays it too, for the entries its root pass catches up on where a sequence has several."""
    ngram = {"scheme": "ngram", "k": 3, "match": 0.5, "acceptance": {"per_depth": [0.5, 0.4, 0.3]}}
    for scheme in (EAGLE, ngram):
        trace, (a, b) = closed_runs(tmp_path, "fused_query_us", (0.0, 2.0), scheme, 18)
        assert np.array_equal(a["query_tokens"], b["query_tokens"])
        drafted = (b["draft_time"] - a["draft_time"]) / (trace.model.heads * 2e-6)
        assert np.allclose(drafted, np.round(drafted), atol=1e-6)
        assert (drafted > 0).any() == (scheme is EAGLE)
        tokens = (b["duration"] - b["draft_time"] - a["duration"] + a["draft_time"]) / (
            trace.model.layers * trace.model.heads * 2e-6)
        assert np.allclose(tokens, np.round(tokens), atol=1e-6)
        assert (tokens <= a["query_tokens"] + 1e-9).all() and (tokens > 0).any()
        assert np.allclose(tokens[a["query_tokens"] == a["batch_size"]], 0, atol=1e-6)  # one query token each: nothing paid
        prefill = a["prefill_tokens"] > 0
        assert prefill.any() and (tokens[prefill] >= a["prefill_tokens"][prefill] - 1e-9).all()
        decode = ~prefill
        whole = np.isclose(tokens[decode], a["query_tokens"][decode])
        if scheme is EAGLE:  # every decoding sequence drafts (but one with a token left to go)
            assert whole.mean() > 0.8
        else:  # some sequences find no match: they decode beside the verifying ones
            assert ((tokens > 0) & (tokens < a["query_tokens"])).any()


def test_steps_pay_a_verification_call_per_distinct_draft_shape(tmp_path):
    """verify_call_us per call: a step whose sequences share one static chain or tree shape pays
    one call (more where some draft less or nothing beside them), EAGLE-2's per-sequence trees one
    call each;
    pack_node_us per drafted node; spec_step_us once in a step with drafted sequences and
    spec_seq_us per drafted sequence. Closed loop, so the steps and draws are the same either way."""
    medusa = ALL[3]
    base = {"preset": "h100-sxm"}
    wl = {"arrival": {"process": "closed", "concurrency": 6}, "requests": 18,
          "output_tokens": {"dist": "fixed", "value": 40}}
    calls = {}
    for scheme in (EAGLE, medusa, EAGLE2):
        cols = []
        for extra in ({}, {"verify_call_us": 100.0}, {"pack_node_us": 2.0}, {"spec_step_us": 30.0, "spec_seq_us": 7.0}):
            trace = make_trace(tmp_path, hardware={**base, **extra}, workload=wl, speculation=[scheme])
            cols.append(simulate(trace, trace.speculation[0], make_requests(trace.workload, trace.seed)).steps.columns())
        a, b, c, d = cols
        assert all(np.array_equal(a["query_tokens"], x["query_tokens"]) for x in (b, c, d))
        n = (b["duration"] - a["duration"]) / 100e-6  # calls per step
        assert np.allclose(n, np.round(n), atol=1e-6) and (n >= 0).all()
        decode = (a["prefill_tokens"] == 0) & (a["batch_size"] == 6)
        nodes = a["query_tokens"] - a["batch_size"]
        assert np.allclose((c["duration"] - a["duration"])[decode], 2e-6 * nodes[decode], rtol=1e-9, atol=1e-12)
        assert (nodes[decode] > 0).any()
        # 30 us a step with drafts, 7 us a drafted sequence: the sequences drafting, a whole number
        spec = (d["duration"] - a["duration"])[decode & (nodes > 0)]
        drafted = (spec - 30e-6) / 7e-6
        assert np.allclose(drafted, np.round(drafted), atol=1e-6) and set(np.round(drafted)) <= set(range(1, 7))
        assert np.allclose((d["duration"] - a["duration"])[decode & (nodes == 0)], 0.0, atol=1e-12)
        calls[scheme["scheme"]] = np.round(n[decode & (nodes > 0)])
    # static shapes: one call in most steps (a sequence near its end drafts a shorter chain, a shape of its own)
    assert np.median(calls["eagle"]) == 1 and np.median(calls["medusa"]) == 1
    assert calls["eagle2"].max() >= 4 and calls["eagle2"].mean() > 2  # six sequences' trees rarely coincide


def test_goodput_prediction_prices_the_verification_calls(tmp_path):
    """Speculator.predict_step adds what a step pays for verification: one call for a static
    shape (a tree's walk too), one per sequence for EAGLE-2's trees, packing every node, a
    speculative step's and each drafting sequence's rest; one call for a step that drafts nothing."""
    medusa = ALL[3]
    fields = {"verify_call_us": 100.0, "tree_call_us": 50.0, "tree_node_us": 3.0, "pack_node_us": 2.0,
              "spec_step_us": 30.0, "spec_seq_us": 7.0}
    for scheme, depth in ((EAGLE, 3), (medusa, 3), (EAGLE2, 4)):
        got = []
        for extra in ({}, fields):
            trace = make_trace(tmp_path, hardware={"preset": "h100-sxm", **extra}, speculation=[scheme])
            sp = Speculator(trace.speculation[0], trace, 1)
            got.append((sp.predict_step(4, 200.0, depth), sp.predict_step(4, 200.0, 0), sp.nodes(depth)))
        (a, a0, nodes), (b, b0, _) = got
        assert b0 - a0 == pytest.approx(100e-6, rel=1e-6)
        calls, trees = {"eagle": (1, 0), "medusa": (1, 1), "eagle2": (4, 4)}[scheme["scheme"]]
        want = 100e-6 * calls + trees * (50e-6 + 3e-6 * nodes) + 2e-6 * 4 * nodes + 30e-6 + 7e-6 * 4
        assert b - a == pytest.approx(want, rel=1e-6), scheme["scheme"]


def test_eagle2_drafting_pays_per_candidate(tmp_path):
    """draft_cand_us: EAGLE-2's drafter pays it for every candidate its passes score, n x (k +
    (depth - 1) k^2); other drafters do not."""
    got = {}
    for extra in ({}, {"draft_cand_us": 2.0}):
        trace = make_trace(tmp_path, hardware={"preset": "h100-sxm", **extra}, speculation=[EAGLE2, EAGLE])
        eagle2, eagle = trace.speculation
        got[bool(extra)] = (eagle2.drafter(trace)(3, 600, 4, (), 3, 0, 0).time,
                            eagle.drafter(trace)(3, 600, 4, eagle.tree(4), 3, 0, 0).time)
    k = EAGLE2["topk"]
    assert got[True][0] - got[False][0] == pytest.approx(2e-6 * 3 * (k + 3 * k * k), rel=1e-6)
    assert got[True][1] == got[False][1]


def test_prompt_lookup_drafts_on_its_match_rate(tmp_path):
    """`match`: a sequence drafts with that probability (seeded draws); the acceptance applies to
    the drafted steps, so each drafted step accepts as many tokens as with match 1; the steps
    without drafts decode one token beside the others (mixed passes)."""
    ngram = ALL[6]
    got = {}
    for m in (1.0, 0.5):
        trace = make_trace(tmp_path, workload={"arrival": {"process": "closed", "concurrency": 4}, "requests": 40,
                                               "output_tokens": {"dist": "fixed", "value": 100}},
                           speculation=[{**ngram, "match": m}])
        res = simulate(trace, trace.speculation[0], make_requests(trace.workload, trace.seed))
        drafted = sum(res.acceptance.values())
        accepted = sum(a * n for (_, a), n in res.acceptance.items())
        got[m] = (drafted / res.decode_seq_steps, accepted / drafted, res.steps.columns())
    assert got[1.0][0] > 0.95  # all but the last step of some requests
    assert got[0.5][0] == pytest.approx(0.5 * got[1.0][0], abs=0.03)
    assert got[0.5][1] == pytest.approx(got[1.0][1], rel=0.05)
    cols = got[0.5][2]
    assert (cols["query_tokens"] - cols["batch_size"] < 3 * cols["batch_size"]).any()  # some sequences did not draft
    with pytest.raises(SpecError, match="match"):
        make_trace(tmp_path, speculation=[{**ngram, "match": 0}])


def test_batch_mixed_flag():
    from sim.scheduler import Batch
    def batch(query, trees):
        n = len(query)
        return Batch(seqs=[None] * n, query=query, trees=trees, plans=[None] * n, samples=[True] * n,
                     decode=[True] * n, context=[10] * n)
    assert batch([1, 1], [(), ()]).mixed() == 0
    assert batch([1, 1], [(-1,), (-1, 0)]).mixed() == 0
    assert batch([1, 1], [(-1,), ()]).mixed() == 1
    assert batch([64, 1], [(), ()]).mixed() == 1
    assert batch([64], [()]).mixed() == 0


def test_steps_record_the_drafters_share(tmp_path):
    """draft_time: the drafter's price within each step's duration, on drafting steps only."""
    trace = make_trace(tmp_path, speculation=[EAGLE2])
    res = simulate(trace, trace.speculation[0], make_requests(trace.workload, trace.seed))
    cols = res.steps.columns()
    drafted = (cols["query_tokens"] > cols["batch_size"]) & (cols["prefill_tokens"] == 0)
    assert drafted.any() and (cols["draft_time"][drafted] > 0).all()
    assert (cols["draft_time"][cols["query_tokens"] == cols["batch_size"]] == 0).all()
    assert (cols["draft_time"] < cols["duration"]).all()


@pytest.mark.parametrize("entry", [MIXED, MIXED2], ids=["chain", "dynamic"])
def test_mixture_gives_each_request_its_own_acceptance(tmp_path, entry):
    """A mixture assigns each request one component and keeps it: the shares follow the
    weights, the expectation is the components' weighted one, and requests spread in steps far
    more than under the pooled model (the mixture's fast requests finish in fewer steps)."""
    wl = {"arrival": {"process": "closed", "concurrency": 8}, "requests": 80,
          "output_tokens": {"dist": "fixed", "value": 60}}
    trace = make_trace(tmp_path, workload=wl, speculation=[entry])
    scheme = trace.speculation[0]
    spec = Speculator(scheme, trace, seed=3)

    class Seq:
        def __init__(self, i):
            self.id = i
    picks = [spec.group(Seq(i)) for i in range(1000)]
    assert [spec.group(Seq(i)) for i in range(1000)] == picks  # kept
    weights = [w for w, _ in scheme.acceptance.components]
    for g, w in enumerate(weights):
        assert picks.count(g) / 1000 == pytest.approx(w, abs=0.005)
    d = scheme.max_depth
    alone = [Speculator(replace(scheme, acceptance=a), trace, 3).expected_accepted(d) for _, a in spec.groups]
    assert spec.expected_accepted(d) == pytest.approx(sum(w * e for w, e in zip(weights, alone)))
    assert alone[0] > 1.5 * alone[1]
    res = simulate(trace, scheme, make_requests(trace.workload, trace.seed))
    steps = np.array([s.steps for s in res.seqs])
    single = make_trace(tmp_path, workload=wl, speculation=[{**entry, "acceptance": pooled_form(scheme)}])
    other = simulate(single, single.speculation[0], make_requests(single.workload, single.seed))
    assert steps.std() > 2 * np.array([s.steps for s in other.seqs]).std()
    assert steps.max() > 1.4 * steps.min()


@pytest.mark.parametrize("entry", [MIXED, MIXED2], ids=["chain", "dynamic"])
def test_requests_named_by_a_component_keep_it(tmp_path, entry):
    """A component's request_ids give it those requests, whatever the draw would have; the
    other requests draw as before (the same sequence of draws as with no requests named)."""
    comps = entry["acceptance"]["mixture"]
    named = {**entry, "label": "named", "acceptance": {"mixture": [{**comps[0], "request_ids": [5, 7]}, {**comps[1], "request_ids": [0]}]}}
    trace = make_trace(tmp_path, speculation=[named, entry])
    spec, free = (Speculator(s, trace, seed=3) for s in trace.speculation)

    class Seq:
        def __init__(self, i):
            self.id = i
    assert [spec.group(Seq(i)) for i in (5, 7, 0)] == [0, 0, 1]
    drawn = [i for i in range(40) if i not in (0, 5, 7)]
    assert [spec.group(Seq(i)) for i in drawn] == [free.group(Seq(i)) for i in range(len(drawn))]
    assert spec.group(Seq(5)) == 0  # kept


def test_mixture_components_draft_at_their_own_match_rate(tmp_path):
    """Prompt lookup with a component per group of requests, each with its own `match`: its
    sequences draft at that rate (component 0 never, 1 always, 2 about half its steps), the
    expectation and the pooled rate weigh them; without per-component rates the draws are the
    scheme's."""
    comps = [{"weight": 1, "per_depth": [0.6], "match": 0.0, "request_ids": [0, 1]},
             {"weight": 1, "per_depth": [0.6], "match": 1.0, "request_ids": [2, 3]},
             {"weight": 2, "per_depth": [0.6], "match": 0.5, "request_ids": [4, 5, 6, 7]}]
    entry = {"scheme": "ngram", "k": 2, "acceptance": {"mixture": comps}}
    trace = make_trace(tmp_path, speculation=[entry, {**entry, "label": "flat", "match": 0.3,
                                                      "acceptance": {"mixture": [{k: v for k, v in c.items() if k != "match"}
                                                                                 for c in comps]}}])
    spec, flat = (Speculator(s, trace, seed=5) for s in trace.speculation)
    assert spec.match == pytest.approx(0.5) and spec.group_match == [0.0, 1.0, 0.5] and flat.group_match == [0.3] * 3
    assert spec.expected_accepted(2) == pytest.approx(flat.expected_accepted(2) * 0.5 / 0.3)

    class Seq:
        def __init__(self, i):
            self.id, self.output, self.generated, self.computed, self.drafted = i, 100, 0, 10, 0
    counts = np.zeros(8)
    for _ in range(400):
        plans = spec.plan([Seq(i) for i in range(8)])
        counts += [p is not None for p in plans]
    assert counts[:2].sum() == 0 and (counts[2:4] == 400).all()
    assert counts[4:] / 400 == pytest.approx([0.5] * 4, abs=0.08)
    flat_counts = np.zeros(8)
    for _ in range(400):
        flat_counts += [p is not None for p in flat.plan([Seq(i) for i in range(8)])]
    assert flat_counts / 400 == pytest.approx([0.3] * 8, abs=0.08)


def test_ngram_prices_every_lookup_at_the_devices_measured_rate(tmp_path):
    """Prompt lookup's drafter: the device's ngram_call_us per step and ngram_seq_us per
    sequence offered a draft, matched or not; the scheme's host_us (per sequence) overrides the
    device's, and with neither 20 us a sequence."""
    from sim.hardware import hardware_from_node
    from sim.specio import Node
    hw = hardware_from_node(Node({"preset": "cpu", "ngram_call_us": 40, "ngram_seq_us": 15}, "t.yaml", "hardware"), tmp_path)
    entry = {"scheme": "ngram", "k": 2, "acceptance": {"per_depth": [0.6]}, "match": 0.5}
    trace = replace(make_trace(tmp_path, speculation=[entry, {**entry, "label": "own", "host_us": 30}]), hardware=hw)
    measured, own = trace.speculation
    assert measured.drafter(trace)(3, 100, 2, (), 3, 0, 0).time == pytest.approx(40e-6 + 3 * 15e-6)
    assert own.drafter(trace)(3, 100, 2, (), 3, 0, 0).time == pytest.approx(3 * 30e-6)
    assert measured.drafter(replace(trace, hardware=replace(hw, ngram_call_s=0.0, ngram_seq_s=0.0)))(
        3, 100, 2, (), 3, 0, 0).time == pytest.approx(3 * 20e-6)
    spec = Speculator(measured, trace, seed=1)

    class Seq:
        def __init__(self, i, left):
            self.id, self.output, self.generated, self.computed, self.drafted = i, left, 0, 10, 0
    seqs = [Seq(i, 100) for i in range(8)] + [Seq(8, 1)]  # the last one has no token left to draft
    for _ in range(20):
        plans = spec.plan(seqs)
        drafting = sum(p is not None for p in plans)
        assert spec.tried == 8 and drafting < 8 or drafting == 8
        assert spec.step_draft(drafting, 10 * drafting).time == pytest.approx(40e-6 + 8 * 15e-6)


@pytest.mark.parametrize("entry", [EAGLE, ALL[4], ALL[5]], ids=["eagle", "mtp", "draft"])
def test_drafter_passes_on_the_reference_take_the_longest_context(tmp_path, entry):
    """On a profile with attn_dense (the CPU reference's padded calls: sim.cost.Work.group_pad)
    a step's drafting costs the time of its drafting sequences all as long as the longest, its
    flops and bytes their own; elsewhere the padding is 0 and costs nothing."""
    dense = make_trace(tmp_path, hardware={"preset": "cpu", "attn_dense": True}, speculation=[entry])
    spec = Speculator(dense.speculation[0], dense, seed=1)

    class Seq:
        def __init__(self, i, computed):
            self.id, self.output, self.generated, self.computed, self.drafted = i, 100, 1, computed, 0
    contexts = [100, 400, 250]
    spec.plan([Seq(i, c) for i, c in enumerate(contexts)])
    assert spec.pad(contexts) == 3 * 400 - 750
    padded, own, longest = spec.step_draft(3, 750, 450), spec.step_draft(3, 750), spec.step_draft(3, 1200)
    assert padded.time == longest.time > own.time and (padded.flops, padded.bytes) == (own.flops, own.bytes)
    gpu = make_trace(tmp_path, speculation=[entry])
    assert Speculator(gpu.speculation[0], gpu, seed=1).pad(contexts) == 0


@pytest.mark.parametrize("entry", [EAGLE2, MIXED2], ids=["one", "mixture"])
def test_dynamic_trees_near_a_requests_end_are_grown_to_the_depth_left(tmp_path, entry):
    """Where a sequence has fewer tokens left than the depth, its EAGLE-2 tree is one of its
    component's library trees grown to the depth left, as the engine grows it (tree_tokens
    nodes within that depth; at depth 1 the root's top-k), not a deep tree cut."""
    from sim import trees as T
    trace = make_trace(tmp_path, speculation=[entry])
    spec = Speculator(trace.speculation[0], trace, seed=2)
    g = len(spec.groups) - 1
    for limit, nodes in ((1, 6), (2, 30), (3, 30)):
        grown = {id(t) for t in spec.libraries[g].trees(limit)}
        for _ in range(10):
            t = spec.tree(5, limit, g)
            assert id(t) in grown and max(T.depths(t.parents)) <= limit and len(t.parents) == nodes
    whole = {id(t) for t in spec.libraries[g].trees(5)}
    assert id(spec.tree(5, 9, g)) in whole


def pooled_form(scheme) -> dict:
    """The mixture's pooled model as a single-population form."""
    a = scheme.acceptance
    if a.confidence is not None:
        return {"confidence": {"top1_mean": a.confidence.top1_mean}}
    return {"rank_depth": [list(r) for r in a.rank.probs]}


def test_matrix_shapes_are_the_family_checkpoints_matrices():
    """The (k, n) a calibration times for the family trace (sim.cost.model_shapes of the target,
    each scheme's matrix_shapes) are exactly the weight matrices the engine's family multiplies
    by (`h @ W.T`, W (n, k)): every 2-D weight of its checkpoints (the tied embedding as the LM
    head), and each Medusa head's h x h block."""
    import torch

    from sim.cost import model_shapes
    from sim.spec import load_trace
    trace = load_trace(ROOT / "traces" / "family-schemes.yaml")
    priced = model_shapes(trace.model).union(*(s.matrix_shapes(trace.model) for s in trace.speculation))
    family = ROOT / "engine" / "family"
    held = set()
    for name in ("target", "draft", "eagle", "mtp", "medusa"):
        for key, w in torch.load(family / f"{name}.pt", map_location="cpu", weights_only=True)["state_dict"].items():
            if w.dim() == 2 and not key.endswith("b"):
                held.add((w.shape[1], w.shape[0]))
            elif w.dim() == 3:  # Medusa's heads, (K, n, k)
                held.add((w.shape[2], w.shape[1]))
    assert priced == held
