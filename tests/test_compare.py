"""validation.compare (with validation.pooling and validation.host_speed): acceptance rates from
engine counts, signed errors, pooled runs and their spreads, the host's speed, and one tiny
end-to-end run."""
import copy
import json
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import yaml

import pytest

from sim.metrics import dist
from sim.spec import load_trace

from validation.compare import METRICS, compare, errors
from validation.measure import per_depth_rates
from validation.pooling import group_percentiles, median_p99, pool_runs, rotated
from tests.helpers import tiny_engine_trace, write_trace

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_per_depth_rates_from_counts():
    # drafted 3 each time: 50 accepted 0, 30 accepted 1, 20 accepted 3
    rates, n = per_depth_rates({(3, 0): 50, (3, 1): 30, (3, 3): 20})
    assert n == 100
    assert rates == pytest.approx([0.5, 20 / 50, 1.0])
    # shorter drafts only count where they reached the depth
    rates, _ = per_depth_rates({(1, 1): 10, (2, 1): 10, (2, 2): 10})
    assert rates == pytest.approx([1.0, 0.5])


def test_errors_are_signed_relative():
    summary = lambda thr, steps: {"throughput_tok_s": thr, "ttft_s": {"p50": 1.0, "p99": 2.0},  # noqa: E731
                                  "tpot_s": {"p50": 0.1, "p99": 0.2}, "steps": steps, "duration_s": 1000 / thr,
                                  "draft_s": 2.0,
                                  "allocator": {"page_allocs": 5, "page_frees": 5, "peak_pages": 3}}
    eng = {"runs": [{"scheme": "none", "label": "none", "concurrency": 1, "summary": summary(100.0, 10)}]}
    sim = {"runs": [{"scheme": "none", "label": "none", "concurrency": 1, "summary": summary(110.0, 9)}]}
    err = errors(eng, sim)["runs"][0]["errors"]
    assert err["throughput_tok_s"] == pytest.approx(0.10) and err["steps"] == pytest.approx(-0.10)
    assert set(err) == set(METRICS) and err["peak_pages"] == 0
    # the same 1,000 tokens: throughput's error is the product of the steps' and the step time's
    assert (1 + err["throughput_tok_s"]) * (1 + err["steps"]) * (1 + err["step_time"]) == pytest.approx(1.0)
    assert err["draft_time"] == pytest.approx(10 / 9 - 1)  # the same drafting time over fewer steps


def test_repeated_engine_runs_are_pooled_end_to_end():
    def seq(i, first, finish):  # 128-token prompt, 5 output tokens, arriving at 0
        return SimpleNamespace(id=i, arrival=0.0, first_token=first, finish=finish, prompt=128, output=5, steps=4,
                               preemptions=0)

    def run(duration, steps, allocs, first, accepted):
        seqs = [seq(0, first, first + 4 * 0.1), seq(1, 2 * first, 2 * first + 4 * 0.3)]
        summary = {"throughput_tok_s": 10 / duration, "output_tokens": 10, "duration_s": duration, "steps": steps,
                   "draft_s": duration / 4,
                   "ttft_s": {}, "tpot_s": {}, "allocator": {"page_allocs": allocs, "page_frees": allocs, "peak_pages": 4}}
        result = SimpleNamespace(seqs=seqs, acceptance={(2, accepted): 3}, decode_seq_steps=4)
        return ({"model": {}, "runs": [{"label": "mtp", "concurrency": 2, "summary": summary}]},
                {"mtp-2": result})

    (r1, e1), (r2, e2) = run(1.0, 10, 6, 0.1, 1), run(3.0, 11, 8, 0.2, 2)
    s = pool_runs([r1, r2], [e1, e2])["runs"][0]
    # 20 tokens over 4 seconds, not the median or the mean of 10 and 3.33 tok/s
    assert s["summary"]["throughput_tok_s"] == pytest.approx(5.0)
    assert s["throughputs"] == pytest.approx([10.0, 10 / 3])
    assert s["summary"]["duration_s"] == 2.0 and s["summary"]["steps"] == 10.5 and s["summary"]["draft_s"] == 0.5
    assert s["summary"]["allocator"]["page_allocs"] == 7.0 and s["summary"]["pooled_runs"] == 2
    # percentiles over the four requests of both runs
    assert s["summary"]["ttft_s"]["p50"] == pytest.approx(0.2)  # of 0.1, 0.2, 0.2, 0.4
    assert s["summary"]["tpot_s"]["p50"] == pytest.approx(0.2)  # of 0.1, 0.3, 0.1, 0.3
    # each run's own p99, the median over the runs: TTFT 0.1, 0.2 in the first, 0.2, 0.4 in the second
    assert s["summary"]["run_p99"]["ttft_s"] == pytest.approx((0.199 + 0.398) / 2)
    assert s["summary"]["run_p99"]["tpot_s"] == pytest.approx(0.298)
    # the accepted-drafts histogram sums the runs, undrafted decode steps counted as rejections
    assert s["acceptance"]["histogram"] == {"0": 2, "1": 3, "2": 3}
    assert s["summary"]["speedup_vs_baseline"] == 1.0  # its own baseline, pooled
    assert r1["runs"][0]["summary"]["steps"] == 10  # the runs' own reports untouched


def test_engine_runs_take_the_schemes_in_rotated_orders_and_pool_them_by_scheme():
    trace = load_trace(ROOT / "traces" / "family-schemes.yaml")
    labels = [s.label for s in trace.speculation]
    orders = [[s.label for s in rotated(trace, i, 4).speculation] for i in range(4)]
    assert orders[0] == labels  # the first run keeps the trace's order
    assert all(sorted(o) == sorted(labels) for o in orders)
    first = [o[0] for o in orders]
    assert len(set(first)) == 4  # a different scheme leads each run
    places = {lab: [o.index(lab) for o in orders] for lab in labels}
    assert all(max(p) - min(p) >= 4 for p in places.values())  # each scheme runs early and late
    assert rotated(trace, 0, 1) is trace

    def report(order, scale):
        runs = [{"label": lab, "concurrency": 1,
                 "summary": {"throughput_tok_s": 10 / d, "output_tokens": 10, "duration_s": d, "steps": 5, "draft_s": 0.0,
                             "ttft_s": {}, "tpot_s": {}, "allocator": {"page_allocs": 1, "page_frees": 1, "peak_pages": 1}}}
                for lab, d in ((lab, scale * {"none": 1.0, "mtp": 2.0}[lab]) for lab in order)]
        return {"model": {}, "runs": runs}

    res = SimpleNamespace(seqs=[], acceptance={}, decode_seq_steps=0)
    pooled = pool_runs([report(["none", "mtp"], 1.0), report(["mtp", "none"], 3.0)],
                       [{"none-1": res, "mtp-1": res}] * 2)["runs"]
    assert [r["label"] for r in pooled] == ["none", "mtp"]  # the first run's order
    assert pooled[0]["throughputs"] == pytest.approx([10.0, 10 / 3])  # none's own runs, not mtp's
    assert pooled[1]["throughputs"] == pytest.approx([5.0, 5 / 3])


def test_a_runs_p99_is_the_median_over_the_runs_and_one_slow_run_leaves_it():
    """Eight runs of 16 requests, one of them 1.5x slower throughout: the p99 over all 128
    requests pooled is that run's tail; the median of each run's p99 stays with the others'."""
    rng = np.random.default_rng(1)
    runs = [rng.lognormal(np.log(0.01), 0.1, 16) for _ in range(8)]
    typical = median_p99(runs)
    assert typical == pytest.approx(np.median([np.percentile(r, 99) for r in runs]))
    slow = [r * (1.5 if i == 0 else 1.0) for i, r in enumerate(runs)]
    assert median_p99(slow) < 1.05 * typical
    assert np.percentile(np.concatenate(slow), 99) > 1.25 * typical
    # a run without any (every request one token) is left out; none with any: None
    assert median_p99([runs[0], np.array([])]) == pytest.approx(np.percentile(runs[0], 99))
    assert median_p99([np.array([])]) is None and median_p99([]) is None


def test_p99_errors_are_read_per_run_where_both_sides_have_them():
    def summary(pooled, per_run):
        s = {"throughput_tok_s": 10.0, "ttft_s": {"p50": 1.0, "p99": 2.0 * pooled}, "tpot_s": {"p50": 0.1, "p99": 0.2 * pooled},
             "steps": 10, "duration_s": 100.0, "draft_s": 0.0, "allocator": {"page_allocs": 5, "page_frees": 5, "peak_pages": 3}}
        if per_run is not None:
            s["run_p99"] = {"ttft_s": 2.0 * per_run, "tpot_s": 0.2 * per_run}
        return {"runs": [{"scheme": "none", "label": "a", "concurrency": 1, "summary": s}]}

    both = errors(summary(1.5, 1.0), summary(1.0, 1.1))["runs"][0]
    assert both["p99_over"] == "runs"
    assert both["errors"]["tpot_p99"] == pytest.approx(0.1) and both["errors"]["ttft_p99"] == pytest.approx(0.1)
    assert both["errors"]["tpot_p99_pooled"] == pytest.approx(1 / 1.5 - 1)
    # one side without them (an old engine report): both read pooled, like with like
    one = errors(summary(1.5, None), summary(1.0, 1.1))["runs"][0]
    assert one["p99_over"] == "pooled" and one["errors"]["tpot_p99"] == pytest.approx(1 / 1.5 - 1)


def test_simulated_percentiles_are_read_over_groups_of_as_many_draws_as_engine_runs():
    """A p99 over 4 requests is their largest; over 16 draws of 4 requests the simulator's pooled
    p99 would sit near the top of all 64. Its percentiles are the mean of each group's own, its
    throughput pooled over every draw."""
    def report(tpots, tokens, duration):
        return {"runs": [{"label": "none", "concurrency": 1,
                          "summary": {"throughput_tok_s": tokens / duration, "ttft_s": dist(np.array(tpots)),
                                      "tpot_s": dist(np.array(tpots))}}]}

    rng = np.random.default_rng(0)
    draws = [rng.lognormal(0.0, 0.5, 4) for _ in range(16)]
    pooled = report(np.concatenate(draws), 640, 32.0)
    groups = [report(d, 40, 2.0) for d in draws]
    got = group_percentiles(copy.deepcopy(pooled), groups)["runs"][0]["summary"]
    assert got["tpot_s"]["p99"] == pytest.approx(np.mean([np.percentile(d, 99) for d in draws]))
    assert got["ttft_s"]["p50"] == pytest.approx(np.mean([np.median(d) for d in draws]))
    assert got["tpot_s"]["p99"] < 0.9 * pooled["runs"][0]["summary"]["tpot_s"]["p99"]
    assert got["throughput_tok_s"] == 20.0
    assert group_percentiles(copy.deepcopy(pooled), []) == pooled


def test_end_to_end_on_a_tiny_trace(tmp_path):
    trace = tiny_engine_trace(tmp_path, requests=4, prompt=24, output=8, k=3)
    out = tmp_path / "cmp"
    result = compare(trace, out)
    assert [r["label"] for r in result["runs"]] == ["none", "ngram"]
    doc = json.loads((out / "comparison.json").read_text())
    assert all(set(r["errors"]) == set(METRICS) for r in doc["runs"])
    assert doc["runs"][0]["errors"]["steps"] == 0  # plain decoding: the same schedule in both
    # drafting time: none for plain decoding; prompt lookup's planner timed in the engine, priced in the simulator
    assert doc["runs"][0]["errors"]["draft_time"] is None
    ngram = doc["runs"][1]
    assert ngram["engine"]["draft_time"] > 0 and ngram["sim"]["draft_time"] > 0
    # the simulator's draws: four per engine run by default
    assert (out / "comparison.png").exists() and (out / "sim" / "draw4" / "report.json").exists()
    assert not (out / "sim" / "draw5").exists()
    # one untimed warm-up run of the engine, apart from the compared one
    assert (out / "engine" / "warmup1" / "report.json").exists() and (out / "engine" / "report.json").exists()
    # a component per request (each its own acceptance and, where some steps found no match, its match rate)
    measured = json.loads((out / "acceptance-ngram.json").read_text())["mixture"]
    assert sorted(i for c in measured for i in c["request_ids"]) == [0, 1, 2, 3]
    assert all(0 <= a <= 1 for c in measured for a in c["per_depth"]) and all(0 <= c.get("match", 1) <= 1 for c in measured)
    # the step time by tokens a pass, per run-tag suffix ("open": no sweep level): plain decodes first
    first = doc["step_time_by_tokens"]["open"][0]
    assert first["tokens"] == [1, 4] and first["steps"] > 0 and 0.1 < first["ratio"] < 10
    # the host's speed during each scheme's runs, against the comparison's mean
    assert all(-0.9 < r["engine_speed"] < 9 and r["step_time_at_mean_speed"] is not None for r in doc["runs"])
    # one engine run: its own speed is its scheme's (over the same mean)
    assert all(r["engine_run_speeds"] == [pytest.approx(1 + r["engine_speed"])] for r in doc["runs"])
    assert all(set(r["at_mean_speed"]) == {"throughput_tok_s", "tpot_p50", "tpot_p99", "step_time"} for r in doc["runs"])
    # prompt lookup's match rate, measured by the engine, passed to the simulator's trace
    sim_doc = yaml.safe_load((out / "sim-trace.yaml").read_text())
    match = sim_doc["speculation"][1]["match"]
    assert 0 < match <= 1


def test_the_engine_model_is_built_once_for_every_run_of_the_trace(tmp_path, monkeypatch):
    """The warm-up and timed runs share one model and its drafters (engine.cli.build): a random
    8B-shaped model draws its weights on the CPU, half a minute a build on a lent GPU's host."""
    import engine.cli
    real, calls = engine.cli.build, []
    monkeypatch.setattr(engine.cli, "build", lambda trace: calls.append(trace.name) or real(trace))
    trace = tiny_engine_trace(tmp_path, requests=2, prompt=16, output=4, k=2)
    out = tmp_path / "cmp"
    compare(trace, out, warmup=1, repeats=2, draws=2)
    assert len(calls) == 1
    assert all((out / "engine" / d / "report.json").exists() for d in ("warmup1", "run1", "run2"))


def test_host_speed_per_run_tag_is_time_weighted_over_the_mean():
    from validation.host_speed import relative_speeds, run_speeds
    got = relative_speeds({"a-1": [(1.0, 2.0), (3.0, 1.0)], "b-1": [(4.0, 1.25)]})
    mean = (1 * 2.0 + 3 * 1.0 + 4 * 1.25) / 8  # 1.25
    assert got["a-1"] == pytest.approx((2.0 + 3.0) / 4 / mean) and got["b-1"] == pytest.approx(1.0)
    assert relative_speeds({}) == {}
    # against the speed the calibration's probes saw (the profile's), not the engine runs' own mean
    probes = [(2.0, 1.0), (6.0, 2.0)]  # mean 1.75
    got = relative_speeds({"a-1": [(1.0, 2.0), (3.0, 1.0)], "b-1": [(4.0, 1.25)]}, probes)
    assert got["a-1"] == pytest.approx(1.25 / 1.75) and got["b-1"] == pytest.approx(1.25 / 1.75)
    # each run's own, in run order, over the same mean
    by_run = run_speeds({"a-1": [(1.0, 2.0), (3.0, 1.0)], "b-1": [(4.0, 1.25)]}, probes)
    assert by_run == {"a-1": [pytest.approx(2.0 / 1.75), pytest.approx(1.0 / 1.75)], "b-1": [pytest.approx(1.25 / 1.75)]}
    assert run_speeds({}) == {}

    def summary(step):
        return {"throughput_tok_s": 1.0, "ttft_s": {"p50": 1.0, "p99": 2.0}, "tpot_s": {"p50": 0.1, "p99": 0.2},
                "steps": 100, "duration_s": 100 * step, "draft_s": 0.0,
                "allocator": {"page_allocs": 5, "page_frees": 5, "peak_pages": 3}}
    engine = {"runs": [{"scheme": "none", "label": "a", "concurrency": 1, "summary": summary(10.0)}]}
    sim = {"runs": [{"scheme": "none", "label": "a", "concurrency": 1, "summary": summary(11.0)}]}
    entry = errors(engine, sim, {"a-1": 1.1})["runs"][0]
    # the engine ran 10% faster than the mean: at the mean speed its step would take 1.1x as long
    assert entry["engine_speed"] == pytest.approx(0.1)
    assert entry["step_time_at_mean_speed"] == pytest.approx(11.0 / (10.0 * 1.1) - 1)
    assert entry["errors"]["step_time"] == pytest.approx(0.1)
    at = entry["at_mean_speed"]  # its throughput at the mean speed 1/1.1 of what it ran, its times 1.1x
    assert at["step_time"] == entry["step_time_at_mean_speed"] and at["throughput_tok_s"] == pytest.approx(0.1)
    assert at["tpot_p50"] == pytest.approx(0.1 / 0.11 - 1) and at["tpot_p99"] == pytest.approx(0.2 / 0.22 - 1)


def test_sim_trace_takes_the_measured_match_only_where_the_trace_gave_none(tmp_path):
    from validation.compare import sim_trace_doc
    trace = write_trace(tmp_path, speculation=[{"scheme": "none"}, {"scheme": "ngram", "k": 3},
                                               {"scheme": "ngram", "k": 3, "label": "fixed", "match": 0.9},
                                               {"scheme": "eagle", "depth": 2}])
    acc = tmp_path / "a.json"
    acc.write_text("{}")
    report = {"model": {"name": "m", "layers": 1}}
    doc = sim_trace_doc(trace, report, tmp_path / "hw.yaml", {"ngram": acc, "fixed": acc, "eagle": acc},
                        {"ngram": 0.4, "fixed": 0.4, "eagle": 1.0})
    s = doc["speculation"]
    assert s[1]["match"] == 0.4 and s[2]["match"] == 0.9 and "match" not in s[3]


def test_grouped_profile_cuts_requests_by_tokens_per_step():
    """Requests ordered by tokens per step and cut into groups of the given size, each group's
    own form weighing its share; fewer than two groups' worth: the pooled form."""
    from validation.measure import grouped_profile
    chain = SimpleNamespace(name="eagle", tree_nodes=None)
    # request i drafts 10 steps at depth 2 and accepts both drafts on i of them, none on the rest
    reqs = {i: ({(2, 2): i, (2, 0): 10 - i}, {}) for i in range(8)} | {99: ({}, {})}
    doc = grouped_profile(chain, reqs, size=2)
    assert [c["weight"] for c in doc["mixture"]] == [0.25] * 4
    firsts = [c["per_depth"][0] for c in doc["mixture"]]
    assert firsts == sorted(firsts) and firsts[0] == pytest.approx(1 / 20) and firsts[-1] == pytest.approx(13 / 20)
    # each group names its requests (request 99 drafted nothing: in none)
    assert [c["request_ids"] for c in doc["mixture"]] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    pooled = grouped_profile(chain, reqs, size=5)  # 8 requests drafted: one group of 5
    assert pooled["per_depth"][0] == pytest.approx(28 / 80)
    tree = SimpleNamespace(name="eagle", tree_nodes=8)
    ranked = {i: ({(2, 1): 1}, {(1, i % 2): 3, (2, 0): 1}) for i in range(4)}
    doc = grouped_profile(tree, ranked, size=2)
    assert all(len(c["rank_depth"][0]) == 10 for c in doc["mixture"])
    # the groups' count grows with the requests: by default each its own, up to MAX_COMPONENTS
    from sim.profiles import MAX_COMPONENTS
    from validation.measure import GROUP_SIZE
    many = {i: ({(2, 2): i % 11, (2, 0): 10 - i % 11}, {}) for i in range(64)}
    assert GROUP_SIZE == 1 and len(grouped_profile(chain, many)["mixture"]) == 64
    more = {i: ({(2, 2): i % 11, (2, 0): 10 - i % 11}, {}) for i in range(MAX_COMPONENTS + 6)}
    assert len(grouped_profile(chain, more)["mixture"]) == MAX_COMPONENTS


def test_grouped_profile_with_tries_gives_each_group_its_match_rate():
    """Prompt lookup: requests ordered by tokens per step that could draft (a step without a
    match gives one), each group's `match` its share of such steps that drafted; a group whose
    requests never drafted takes the pooled form."""
    from validation.measure import grouped_profile, tokens_per_try
    chain = SimpleNamespace(name="ngram", tree_nodes=None)
    # request i: 10 drafted steps accepting both drafts on 5 of them (2 tokens a step on average);
    # of 10 + 2 * i steps that could draft, so fewer matches as i grows; request 9 never matched
    reqs = {i: ({(2, 2): 5, (2, 0): 5}, {}) for i in range(8)} | {9: ({}, {})}
    tries = {i: (10 + 2 * i, 10) for i in range(8)} | {9: (12, 0)}
    assert tokens_per_try(reqs[0][0], 10, 10) == pytest.approx(2.0)
    assert tokens_per_try(reqs[3][0], 16, 10) == pytest.approx(1.0 + 10 / 16)
    doc = grouped_profile(chain, reqs, size=3, tries=tries)
    groups = doc["mixture"]
    assert [c["request_ids"] for c in groups] == [[6, 7, 9], [3, 4, 5], [0, 1, 2]]
    assert [c["match"] for c in groups] == pytest.approx([20 / (22 + 24 + 12), 30 / (16 + 18 + 20), 30 / (10 + 12 + 14)],
                                                         abs=1e-6)
    assert all(c["per_depth"][0] == pytest.approx(0.5) for c in groups)
    # a group that never drafted: the pooled form, its match 0
    lone = grouped_profile(chain, reqs | {8: reqs[0], 10: ({}, {}), 11: ({}, {})}, size=3,
                           tries=tries | {8: (26, 10), 10: (5, 0), 11: (7, 0)})["mixture"]
    assert lone[0]["request_ids"] == [9, 10, 11] and lone[0]["match"] == 0 and lone[0]["per_depth"][0] == pytest.approx(0.5)
    # without tries, no match per group
    assert all("match" not in c for c in grouped_profile(chain, reqs, size=3)["mixture"])


def test_eagle2_profile_is_fitted_to_the_steps_not_cut_short():
    """EAGLE-2's confidence model reproduces the tokens per step of the uncut steps where they
    are given (the simulator cuts whole trees near a request's end as the engine does), else of
    every step."""
    from validation.fit_profiles import confidence_tau
    from validation.measure import add_counts, profile
    scheme = SimpleNamespace(name="eagle2", max_depth=4, topk=4, tree_tokens=12)
    cut, whole = {(2, 1): 10}, {(4, 3): 30, (4, 2): 10}
    hist = add_counts({**cut}, whole)
    fit = profile(scheme, hist, {}, whole)["confidence"]["top1_mean"]
    assert confidence_tau(fit, 4, 4, 12) == pytest.approx(1 + 110 / 40, abs=0.02)
    every = profile(scheme, hist, {})["confidence"]["top1_mean"]
    assert confidence_tau(every, 4, 4, 12) == pytest.approx(1 + 120 / 50, abs=0.02) and every < fit


def test_run_spread_is_the_pooled_throughputs_relative_standard_error():
    """Runs of the same tokens at 100, 50 and 100 tok/s take 1, 2 and 1 units: the pooled
    throughput's relative standard error is their durations' sd / mean / sqrt(3); identical runs
    give 0, one run gives none."""
    import statistics
    from validation.pooling import run_spread
    d = [1.0, 2.0, 1.0]
    assert run_spread([100.0, 50.0, 100.0]) == pytest.approx(statistics.stdev(d) / statistics.mean(d) / 3 ** 0.5)
    assert run_spread([80.0] * 4) == 0.0
    assert run_spread([80.0]) is None and run_spread([]) is None
    summary = {"throughput_tok_s": 1.0, "ttft_s": {"p50": 1.0, "p99": 2.0}, "tpot_s": {"p50": 0.1, "p99": 0.2},
               "steps": 10, "duration_s": 1.0, "draft_s": 0.0, "allocator": {"page_allocs": 1, "page_frees": 1, "peak_pages": 1}}
    run = {"scheme": "none", "label": "a", "concurrency": 1, "summary": summary}
    entry = errors({"runs": [run | {"throughputs": [100.0, 50.0, 100.0]}]}, {"runs": [run]})["runs"][0]
    assert entry["engine_spread"] == pytest.approx(run_spread([100.0, 50.0, 100.0]))
    assert "engine_spread" not in errors({"runs": [run]}, {"runs": [run]})["runs"][0]


def test_the_median_runs_throughput_error_leaves_out_one_slow_run():
    """Where both sides keep their runs' throughputs, `median_run_throughput` compares the
    median draw's with the median run's: a slow run of five moves the pooled error, not it."""
    summary = lambda tput: {"throughput_tok_s": tput, "ttft_s": {"p50": 1.0, "p99": 2.0},  # noqa: E731
                            "tpot_s": {"p50": 0.1, "p99": 0.2}, "steps": 10, "duration_s": 1.0, "draft_s": 0.0,
                            "allocator": {"page_allocs": 1, "page_frees": 1, "peak_pages": 1}}
    run = {"scheme": "none", "label": "a", "concurrency": 1}
    engine = run | {"summary": summary(90.0), "throughputs": [100.0, 101.0, 50.0, 99.0, 100.0]}
    sim = run | {"summary": summary(105.0), "throughputs": [104.0, 106.0, 105.0]}
    entry = errors({"runs": [engine]}, {"runs": [sim]})["runs"][0]
    assert entry["median_run_throughput"] == pytest.approx(105.0 / 100.0 - 1)
    assert entry["errors"]["throughput_tok_s"] == pytest.approx(105.0 / 90.0 - 1)
    assert "median_run_throughput" not in errors({"runs": [engine]}, {"runs": [run | {"summary": summary(1.0)}]})["runs"][0]


def test_timed_ticks_record_each_call_of_the_probes_with_the_host_speed_around_it():
    from validation.host_speed import timed_ticks
    calls, record = [], []
    run = timed_ticks(lambda: (calls.append(1), time.sleep(0.02)), record)
    run()
    run()
    assert len(calls) == 2 and len(record) == 2
    assert all(0.015 < d < 1.0 and v > 0 for d, v in record)  # seconds of the probes, reference loops per second


@pytest.mark.parametrize("iters", [200, 10_000, 40_000])
def test_the_host_reference_makes_no_objects(iters):
    """The reference loop allocates nothing (its reading must not follow the allocator's state: the
    loop before 0.38.0, one new int a step, read 5.6% faster after the probes than after an engine
    run); it makes the runs of increments asked for."""
    import tracemalloc

    from validation.timing import REFERENCE_RUN, host_reference

    def peak_of(fn) -> int:
        """Bytes traced at fn's peak, over before it (the reading itself makes a few)."""
        tracemalloc.reset_peak()
        fn()
        return tracemalloc.get_traced_memory()[1]

    host_reference(iters)
    tracemalloc.start()
    try:
        nothing = peak_of(lambda: None)
        got = peak_of(lambda: host_reference(iters))
    finally:
        tracemalloc.stop()
    assert got == nothing  # one int alive at a time would add 32 bytes
    done = host_reference(iters)
    assert done == max(1, iters // REFERENCE_RUN)


def test_profile_spread_is_each_run_tags_relative_deviation_over_the_resampled_profiles():
    from validation.pooling import figure_noise, profile_spread

    def report(tputs):
        return {"runs": [{"label": "none", "concurrency": 1, "summary": {"throughput_tok_s": tputs[0]}},
                         {"label": "eagle", "concurrency": 1, "summary": {"throughput_tok_s": tputs[1]}}]}
    got = profile_spread([report((100.0, 200.0)), report((110.0, 200.0)), report((90.0, 200.0))])
    assert got["none-1"] == pytest.approx(10.0 / 100.0) and got["eagle-1"] == 0.0
    assert profile_spread([report((100.0, 200.0))]) == {}  # one profile: no spread
    noise = figure_noise([{"launch_s": 1.0, "step_s": 0.0, "attn_dense": True, "kv_sizes": [[1, 2]]},
                          {"launch_s": 3.0, "step_s": 0.0, "attn_dense": True, "kv_sizes": [[1, 2]]}])
    assert noise == {"launch_s": pytest.approx(2 ** 0.5 / 2, abs=1e-4)}  # scalars only, zeros left out


def test_step_time_by_tokens_matches_step_shapes_and_leaves_out_prefill_and_drafting():
    """The engine's steps matched to the simulator's on (label, batch, query tokens): per bin,
    the simulator's mean time of each shape weighted by the engine's count, over the engine's
    time; drafting is taken off both, steps with a prefill chunk and unmatched shapes are left out."""
    from validation.by_tokens import ratio_by_tokens

    def run(rows):  # rows: (duration, batch, query tokens, prefill tokens, draft time)
        d, b, q, p, dr = (np.array(col, dtype=float) for col in zip(*rows))
        cols = {"duration": d, "batch_size": b.astype(int), "query_tokens": q.astype(int),
                "prefill_tokens": p.astype(int), "draft_time": dr}
        return SimpleNamespace(steps=SimpleNamespace(columns=lambda: cols))

    engine = [{"none-4": run([(0.010, 4, 4, 0, 0.0), (0.012, 4, 4, 0, 0.0), (0.100, 4, 132, 128, 0.0)]),
               "medusa-4": run([(0.050, 4, 256, 0, 0.002), (0.030, 3, 192, 0, 0.0)])}]
    sim = [{"none-4": run([(0.011, 4, 4, 0, 0.0), (0.080, 4, 132, 128, 0.0)]),
            "medusa-4": run([(0.040, 4, 256, 0, 0.004)])},  # no 3-sequence step: unmatched
           {"none-4": run([(0.013, 4, 4, 0, 0.0)]), "medusa-4": run([(0.044, 4, 256, 0, 0.004)])}]
    got = ratio_by_tokens(engine, sim)["4"]
    assert [r["tokens"] for r in got] == [[1, 4], [129, None]]
    small, big = got
    assert small["steps"] == 2 and small["ratio"] == pytest.approx((0.012 * 2) / (0.010 + 0.012))
    assert big["steps"] == 1 and big["ratio"] == pytest.approx(0.038 / 0.048)  # (0.036 + 0.040) / 2 over 0.048
    assert big["engine_s"] == pytest.approx(0.048)


@pytest.mark.parametrize("extra", [["--cycles", "0", "--calibrate"], ["--cycles", "2"]])
def test_cycles_must_be_positive_and_go_with_calibrate(tmp_path, extra, capsys):
    """`--cycles` (calibration probe cycles per engine run) below 1, or without --calibrate, is a
    usage error (exit 2) before anything runs."""
    from validation.__main__ import main
    with pytest.raises(SystemExit) as exc:
        main(["compare", "traces/engine-tiny.yaml", "--out", str(tmp_path / "o"), *extra])
    assert exc.value.code == 2 and "--cycles must be at least 1" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_draft_time_by_kind_splits_admissions_from_ordinary_steps():
    """A step with a prefill chunk or right after one is an admission; the others are ordinary,
    by mean and, for the ordinary steps, median too; schemes that draft nothing are left out, and
    a kind missing on one side gets no row."""
    from validation.draft_kinds import kind_line, ratio_by_kind, step_kinds

    assert step_kinds(np.array([128, 0, 0, 64, 0, 0])).tolist() == [True, True, False, True, True, False]

    def run(rows):  # rows: (prefill tokens, draft time)
        p, dr = (np.array(col, dtype=float) for col in zip(*rows))
        cols = {"prefill_tokens": p.astype(int), "draft_time": dr}
        return SimpleNamespace(steps=SimpleNamespace(columns=lambda: cols))

    engine = [{"mtp1-4": run([(128, 0.010), (0, 0.006), (0, 0.002), (0, 0.002), (0, 0.008)]),
               "none-4": run([(128, 0.0), (0, 0.0)])},
              {"mtp1-4": run([(128, 0.012), (0, 0.004), (0, 0.002)])}]
    sim = [{"mtp1-4": run([(128, 0.009), (0, 0.005), (0, 0.002), (0, 0.003)]), "none-4": run([(128, 0.0)])},
           {"mtp1-4": run([(0, 0.002)])}]
    got = ratio_by_kind(engine, sim)
    assert list(got) == ["mtp1-4"]
    adm, ordinary = got["mtp1-4"]["admission"], got["mtp1-4"]["ordinary"]
    assert adm["engine_steps"] == 4 and adm["engine_mean"] == pytest.approx((0.010 + 0.006 + 0.012 + 0.004) / 4)
    assert adm["ratio"] == pytest.approx(((0.009 + 0.005) / 2) / 0.008)
    assert ordinary["engine_steps"] == 4 and ordinary["engine_mean"] == pytest.approx(0.0035)
    assert ordinary["engine_median"] == pytest.approx(0.002) and ordinary["sim_median"] == pytest.approx(0.002)
    assert ordinary["ratio"] == pytest.approx(((0.002 + 0.003 + 0.002) / 3) / 0.0035)
    assert "median_ratio" not in adm
    only_ordinary = ratio_by_kind(engine, [{"mtp1-4": run([(0, 0.002)])}])["mtp1-4"]
    assert list(only_ordinary) == ["ordinary"]
    assert kind_line("mtp1-4", got["mtp1-4"]).startswith("mtp1-4: simulator over engine drafting a step: admission 0.875 (8.00 ms engine, 4 steps)")
