"""The engine's model-based drafters (engine/drafting): lossless at temperature 0 in both paging
modes and under preemption, drafts that depend on the sequence alone (not on the batch, the
paging mode or the step at which a drafter catches up), and a draft model that equals the target
drafting everything it can."""
from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch

from engine.checkpoint import resolve
from engine.drafting.heads import Drafters
from engine.runner import run_scheme
from sim.spec import load_trace
from sim.workload import make_requests
from tests import helpers

SHAPE = {"random_shape": "tiny", "layers": 2, "hidden": 64, "heads": 4, "kv_heads": 2, "head_dim": 16,
         "ffn": 128, "vocab": 512}
SCHEMES = [
    {"scheme": "none"},
    {"scheme": "draft", "k": 3},
    {"scheme": "medusa", "heads": 3, "lm_head": "shared"},
    {"scheme": "eagle", "depth": 3},
    {"scheme": "eagle", "depth": 3, "tree": 8, "label": "eagle-tree",
     "acceptance": {"rank_depth": [[0.5, 0.2, 0.1], [0.4, 0.2], [0.3]]}},
    {"scheme": "eagle2", "depth": 3, "topk": 3, "tree_tokens": 10},
    # a tree shallower than its depth: the levels that expand nothing run no pass
    {"scheme": "eagle", "depth": 4, "tree": 5, "label": "eagle-shallow",
     "acceptance": {"rank_depth": [[0.5, 0.3, 0.15], [0.1], [0.05], [0.01]]}},
    {"scheme": "mtp", "depth": 2},
    {"scheme": "eagle", "depth": 3, "label": "eagle-table", "policy": {"batch_table": {"1-2": 3, "3-": 1}}},
    {"scheme": "draft", "k": 3, "label": "draft-goodput", "policy": "goodput", "acceptance": {"per_depth": [0.6]}},
]
BASE = {
    "version": 1, "name": "drafters", "seed": 7, "hardware": "cpu", "model": "tiny",
    "serving": {"max_num_seqs": 4, "max_num_batched_tokens": 128, "page_size": 8, "kv_pages": 256,
                "paging": "indexshare"},
    "workload": {"requests": 5, "arrival": {"process": "closed", "concurrency": 3},
                 "prompt_tokens": {"dist": "uniform", "min": 8, "max": 40},
                 "output_tokens": {"dist": "uniform", "min": 6, "max": 24}, "temperature": 0.0},
    "speculation": SCHEMES,
    "engine": {"checkpoint": SHAPE, "backend": "torch", "device": "cpu"},
}

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def run_all(tmp_path: Path, **overrides):
    tmp_path.mkdir(parents=True, exist_ok=True)
    trace = load_trace(helpers.write_trace(tmp_path, BASE, **overrides))
    source = resolve(trace)
    model = source.build()
    drafters = source.drafters(model)
    workload = make_requests(trace.workload, trace.seed)
    return {s.label: run_scheme(trace, s, workload, model, drafters=drafters) for s in trace.speculation}


@pytest.mark.parametrize("paging", ["indexshare", "naive"])
def test_every_scheme_is_lossless_at_temperature_zero(tmp_path, paging):
    res = run_all(tmp_path, serving={**BASE["serving"], "paging": paging})
    base = res["none"].tokens
    for label, r in res.items():
        assert r.tokens == base, f"{label} ({paging}) changed the greedy output"
    drafted = {label: sum(r.result.acceptance.values()) for label, r in res.items()}
    assert all(drafted[k] > 0 for k in drafted if k != "none"), drafted
    # a model drafter drafts on every sequence-step that may (its match rate is 1)
    assert all(r.drafted == r.draftable == drafted[k] for k, r in res.items() if k != "none")
    # the counts per request add up to the run's (acceptance, and the static trees' ranks)
    for label, r in res.items():
        assert set(r.by_request) == {s.id for s in r.result.seqs}
        for whole, i in ((r.result.acceptance, 0), (r.ranks, 1)):
            added: dict = {}
            for counts in r.by_request.values():
                for key, n in counts[i].items():
                    added[key] = added.get(key, 0) + n
            assert added == whole, label
    assert sum(res["eagle-tree"].ranks.values()) > 0
    assert sum(1 for h, _ in res["eagle"].by_request.values() if h) > 1
    # the steps not cut short by a sequence's end: a part of each request's counts; the cut ones
    # (its last few steps) are left out
    for label, r in res.items():
        if label == "none":
            continue
        for rid, counts in r.uncut.items():
            mine = r.by_request[rid][0]
            assert all(0 < n <= mine.get(key, 0) for key, n in counts.items()), label
        whole, uncut = sum(r.result.acceptance.values()), sum(sum(c.values()) for c in r.uncut.values())
        assert 0 < uncut < whole, label


def test_lossless_under_preemption(tmp_path):
    tight = {**BASE["serving"], "kv_pages": 14, "max_num_seqs": 3}
    res = run_all(tmp_path, serving=tight)
    assert any(r.result.preemptions for r in res.values()), "the pool was meant to force preemptions"
    base = res["none"].tokens
    for label, r in res.items():
        assert r.tokens == base, f"{label} changed the greedy output under preemption"


def per_request_steps(res):
    return {label: {s.id: s.steps for s in r.result.seqs} for label, r in res.items()}


def test_drafts_depend_on_the_sequence_alone(tmp_path):
    """At temperature 0 a request's drafts (hence its steps) are the same alone or batched, in
    either paging mode: catch-up, scratch rows and slot mapping do not leak into the drafts."""
    alone = per_request_steps(run_all(tmp_path / "a", workload={**BASE["workload"],
                                                                "arrival": {"process": "closed", "concurrency": 1}}))
    batched = per_request_steps(run_all(tmp_path / "b", serving={**BASE["serving"], "paging": "naive"}))
    assert alone == batched


def test_eagle2_records_its_confidences_beside_the_ranks(tmp_path):
    """At temperature 0 an EAGLE-2 run records (engine/confidence_log.py) one pick per rank it
    counts, the pick's rank the same (-1 where the rank count says none of the candidates), the
    candidates' probabilities ranked and summing to at most 1, and at least every plan's root."""
    res = run_all(tmp_path, speculation=[s for s in SCHEMES if s["scheme"] == "eagle2"])["eagle2"]
    logs = res.confidence
    assert set(logs) == {rid for rid, (_, ranks) in res.by_request.items() if ranks}
    for rid, log in logs.items():
        ranks = res.by_request[rid][1]
        assert len(log.picks) == sum(ranks.values())
        got: dict = {}
        for probs, r in log.picks:
            assert list(probs) == sorted(probs, reverse=True) and sum(probs) <= 1 + 1e-6
            key = r if r >= 0 else len(probs)
            got[key] = got.get(key, 0) + 1
        want: dict = {}
        for (_, r), n in ranks.items():
            want[r] = want.get(r, 0) + n
        assert got == want
        assert log.top1[0] >= sum(h for h in res.by_request[rid][0].values())  # every plan's root at least
        assert 0 < log.top1[1] <= log.top1[0] and log.rank_mass[0] == pytest.approx(log.top1[1])


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_a_draft_model_equal_to_the_target_is_always_accepted(tmp_path, temperature):
    """At temperature 0 its greedy drafts are the target's; at temperature 1 a chain drafter
    samples from q and hands q to rejection sampling, and with p = q every draft is accepted."""
    trace = load_trace(helpers.write_trace(tmp_path, BASE, speculation=[{"scheme": "draft", "k": 3}],
                                           workload={**BASE["workload"], "temperature": temperature}))
    source = resolve(trace)
    model = source.build()
    workload = make_requests(trace.workload, trace.seed)
    res = run_scheme(trace, trace.speculation[0], workload, model,
                     drafters=Drafters(eagle=None, medusa=None, draft=copy.copy(model), mtp=[]))
    counts = res.result.acceptance
    assert counts and all(acc == depth for (depth, acc) in counts), counts


def test_a_missing_drafter_is_a_clear_error(tmp_path):
    trace = load_trace(helpers.write_trace(tmp_path, BASE, speculation=[{"scheme": "eagle", "depth": 2}]))
    source = resolve(trace)
    model = source.build()
    workload = make_requests(trace.workload, trace.seed)
    with pytest.raises(ValueError, match="eagle drafter"):
        run_scheme(trace, trace.speculation[0], workload, model, drafters=None)


def test_policies_choose_the_depth(tmp_path):
    """batch_table: depth 1 once three sequences decode; goodput: the simulator's policy object."""
    res = run_all(tmp_path)
    table = res["eagle-table"].result.acceptance
    assert {d for d, _ in table} <= {1, 2, 3} and any(d == 1 for d, _ in table) and any(d > 1 for d, _ in table)
    assert res["draft-goodput"].tokens == res["none"].tokens


def test_sampled_runs_of_every_scheme_complete(tmp_path):
    """Temperature 1: sampled chains with q, deterministic trees, Medusa's typical acceptance."""
    schemes = SCHEMES[1:] + [{"scheme": "medusa", "heads": 3, "lm_head": "shared", "typical": True, "label": "medusa-typical",
                              "acceptance": {"rank_depth": [[0.5, 0.2], [0.4, 0.1], [0.3]]}}]
    res = run_all(tmp_path, speculation=[{"scheme": "none"}] + schemes,
                  workload={**BASE["workload"], "temperature": 1.0})
    for label, r in res.items():
        assert all(len(t) == s.output for s in r.result.seqs for t in [r.tokens[s.id]]), label


@pytest.mark.parametrize("pages", [256, 14])
def test_the_simulator_prices_the_passes_the_engine_drafters_run(tmp_path, monkeypatch, pages):
    """Each model drafter's forward passes in each step, as (query rows, LM-head rows, sequences
    with several rows), are the ones its scheme prices in the simulator (`passes`), given the
    simulator's catch-up count for the same sequences: the whole context at a first draft, then
    the accepted drafts + 1, and again the whole context after a preemption (14 pages force
    some)."""
    from engine.drafting.draft_model import DraftModelDrafter
    from engine.drafting.eagle import EagleDrafter
    from engine.drafting.mtp import MTPDrafter
    from engine.model import Model
    from sim.drafters import pass_rows
    from sim.speculation import catch_up

    active: list[list] = []
    steps: list[tuple] = []
    forward = Model.forward

    def counted(self, step, cache, inputs=None):
        if active:
            several = int((torch.bincount(step.q_seq) > 1).sum())
            active[-1].append((int(step.token_ids.shape[0]), int(step.logit_rows.shape[0]), several))
        return forward(self, step, cache, inputs=inputs)

    def wrap(draft):
        def drafting(self, seqs, ks):
            fresh, first, several = catch_up(seqs)
            active.append([])
            try:
                out = draft(self, seqs, ks)
            finally:
                calls = active.pop()
            steps.append((self.scheme, len(seqs), tuple(ks), fresh, first, several, calls))
            return out
        return drafting

    monkeypatch.setattr(Model, "forward", counted)
    for cls in (DraftModelDrafter, EagleDrafter, MTPDrafter):
        monkeypatch.setattr(cls, "draft", wrap(cls.draft))
    schemes = [s for s in SCHEMES if s["scheme"] in ("draft", "eagle", "eagle2", "mtp") and "policy" not in s]
    res = run_all(tmp_path, speculation=schemes, serving={**BASE["serving"], "kv_pages": pages, "max_num_seqs": 3})
    compared: dict[str, int] = {}
    for scheme, n, ks, fresh, first, several, calls in steps:
        if len(set(ks)) > 1:  # a sequence near its end drafts less deep: the simulator prices full depth
            continue
        d = ks[0]
        want = [pass_rows(p, n) for p in scheme.passes(n, d, () if scheme.dynamic else scheme.tree(d), fresh, first,
                                                       several)]
        assert calls == want, (scheme.label, n, ks, fresh, first, several)
        compared[scheme.label] = compared.get(scheme.label, 0) + 1
    assert set(compared) == {s.get("label", s["scheme"]) for s in schemes}, compared
    assert any(fresh > n + first * 8 for _, n, _, fresh, first, _, _ in steps)  # prompts caught up on
    assert any(0 < several < n for _, n, _, _, _, several, _ in steps)  # some with one entry beside several
    if pages == 14:
        assert any(r.result.preemptions for r in res.values())
