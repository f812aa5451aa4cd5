"""EAGLE-2's measured confidence shape: the simulator's sharpened acceptance and measured rank
shares (sim/dyntree.py), their profile fields (sim/profiles.py), the engine's record of its
drafter (engine/confidence_log.py) and the fits from it (validation/confidence.py,
validation.measure.confidence_fit)."""
from __future__ import annotations

import copy
from types import SimpleNamespace

import numpy as np
import pytest

from engine.confidence_log import ConfidenceLog
from sim import trees as T
from sim.dyntree import Confidence, TreeLibrary, grow
from sim.errors import SpecError
from sim.profiles import acceptance_from_node
from sim.specio import Node
from validation.confidence import group_shape, merged, pick_loglik, rank_shares, run_shape, sharpness, top1_concentration
from validation.fit_profiles import confidence_tau


def test_sharpness_one_is_the_calibrated_model():
    """γ = 1 keeps the paper's law (calibration x confidence), tree for tree."""
    conf = np.array([[0.5, 0.25, 0.125], [0.3, 0.2, 0.1]])
    assert np.allclose(Confidence(calibration=0.9).accept(conf, vocab=100), 0.9 * conf)
    a = [t.stop_cum for t in TreeLibrary(Confidence(top1_mean=0.6), 6, 20, seed=2, size=8).trees(4)]
    b = [t.stop_cum for t in TreeLibrary(Confidence(top1_mean=0.6), 6, 20, seed=2, size=8, vocab=4096).trees(4)]
    assert a == b


def test_sharpness_moves_the_target_toward_the_most_confident_child():
    conf = np.array([[0.4, 0.2, 0.1, 0.05]])
    soft, sharp = (Confidence(sharpness=g).accept(conf, vocab=1000)[0] for g in (1.0, 4.0))
    assert sharp[0] > 0.9 > soft[0] and sharp[1:].sum() < soft[1:].sum()
    assert sharp.sum() <= 1.0 + 1e-12
    # most of the mass beyond the top-k, spread over 3,996 tokens: at γ = 1 the target lands in the
    # top-k 4% of the time; sharpened, each top-k token outweighs any of the others, so nearly always
    flat = np.full((1, 4), 0.01)
    assert Confidence().accept(flat, vocab=4000).sum() == pytest.approx(0.04)
    assert Confidence(sharpness=3.0).accept(flat, vocab=4000).sum() == pytest.approx(0.9863, abs=1e-4)


def test_measured_shares_replace_the_geometric_tail():
    c = Confidence(shares=(0.2, 0.1))
    assert np.allclose(c.rest(3), [0.2, 0.1])
    assert np.allclose(c.rest(5), [0.2, 0.1, 0.05, 0.025])  # on by the last two entries' ratio
    assert np.allclose(Confidence(shares=(0.8, 0.6)).rest(3), [0.8 / 1.4, 0.6 / 1.4])  # at most the whole rest
    assert np.allclose(Confidence(tail=0.5).rest(4), [0.5, 0.25, 0.125])
    rows = c.confidences(np.random.default_rng(0), 5, 3, 1)
    assert np.allclose(rows[:, 1], 0.2 * (1 - rows[:, 0])) and np.allclose(rows[:, 2], 0.1 * (1 - rows[:, 0]))


def test_sharpened_trees_stay_valid_and_gain_tokens():
    rng = np.random.default_rng(0)
    model = Confidence(top1_mean=0.35, top1_concentration=1.8, sharpness=3.5, shares=(0.15, 0.08, 0.05))
    for _ in range(10):
        t = grow(model, rng, 5, 6, 30, vocab=4096)
        assert T.is_tree(t.parents) and len(t.parents) == 30 and 0 < t.expected <= 5
    base = confidence_tau(0.35, 5, 6, 30, size=64, vocab=4096, top1_concentration=1.8, shares=(0.15, 0.08, 0.05))
    sharp = confidence_tau(0.35, 5, 6, 30, size=64, vocab=4096, top1_concentration=1.8, shares=(0.15, 0.08, 0.05),
                           sharpness=3.5)
    assert sharp > base + 1.0


def _acc(doc):
    return acceptance_from_node(Node(doc, "t.yaml", "acceptance"), None, 6)


def test_profiles_read_and_describe_sharpness_and_shares():
    acc = _acc({"confidence": {"top1_mean": 0.4, "sharpness": 3.5, "shares": [0.15, 0.08]}})
    assert acc.confidence.sharpness == 3.5 and acc.confidence.shares == (0.15, 0.08)
    assert acc.describe()["confidence"]["shares"] == [0.15, 0.08]
    plain = _acc({"confidence": {"top1_mean": 0.4}}).describe()["confidence"]
    assert "sharpness" not in plain and "shares" not in plain  # a calibrated model's report as before
    mix = _acc({"mixture": [{"weight": 1, "confidence": {"top1_mean": 0.4, "sharpness": 2, "shares": [0.2, 0.1]}},
                            {"weight": 3, "confidence": {"top1_mean": 0.8, "sharpness": 4, "shares": [0.1, 0.05, 0.01]}}]})
    assert mix.confidence.sharpness == pytest.approx(3.5)
    assert mix.confidence.shares == pytest.approx((0.125, 0.0625))  # rank by rank, as far as the shortest


@pytest.mark.parametrize("conf, needle", [
    ({"top1_mean": 0.4, "sharpness": 0}, "sharpness"),
    ({"top1_mean": 0.4, "shares": [0.7, 0.6]}, "summing to at most 1"),
    ({"top1_mean": 0.4, "shares": [1.5]}, "shares"),
    ({"top1_mean": 0.4, "shares": []}, "shares"),
])
def test_bad_confidence_fields_name_their_key(conf, needle):
    with pytest.raises(SpecError, match=needle) as exc:
        _acc({"confidence": conf})
    assert "acceptance.confidence" in str(exc.value)


def test_the_log_records_every_expanded_node_and_the_targets_answers():
    """Root candidates [5, 6, 7] (p .5 .3 .1); kept node 0 (token 5) expanded [8, 9] (p .6 .2);
    a pruned expanded node 4 [1, 2] (p .9 .05). The target emitted 5, then 9, then 3: node 0 was
    accepted, its child 9 (rank 1) accepted as node 1, which nobody expanded."""
    log = ConfidenceLog()
    probs = {-1: [0.5, 0.3, 0.1], 0: [0.6, 0.2], 4: [0.9, 0.05]}
    cands = {-1: [5, 6, 7], 0: [8, 9]}
    log.record(probs, cands, emitted=[5, 9, 3], path=[0, 1])
    assert log.top1[0] == 3 and log.top1[1] == pytest.approx(2.0) and log.top1[2] == pytest.approx(0.25 + 0.36 + 0.81)
    assert log.rank_mass == pytest.approx([2.0, 0.55, 0.1])
    assert log.picks == [((0.5, 0.3, 0.1), 0), ((0.6, 0.2), 1)]  # node 1 has no candidates: the walk ends
    log.record({-1: [0.4, 0.4]}, {-1: [1, 2]}, emitted=[7], path=[])
    assert log.picks[-1] == ((0.4, 0.4), -1)  # the target's token is none of them
    both = merged([log, log])
    assert both.top1[0] == 8 and len(both.picks) == 6 and both.rank_mass[0] == pytest.approx(4.8)


def _draw_picks(gamma: float, n: int, topk: int, vocab: int, seed: int = 0) -> list:
    """Picks drawn from sim.dyntree's own law at sharpness gamma (a Beta top-1, measured-like shares)."""
    rng = np.random.default_rng(seed)
    model = Confidence(top1_mean=0.4, top1_concentration=2.0, shares=(0.15, 0.08, 0.05, 0.04), sharpness=gamma)
    conf = model.confidences(rng, n, topk, 1)
    p = model.accept(conf, vocab)
    picks = []
    for row, pr in zip(conf, p):
        u = rng.random()
        k = int(np.searchsorted(np.cumsum(pr), u, side="right"))
        picks.append((tuple(row), k if k < topk else -1))
    return picks


@pytest.mark.parametrize("gamma", [1.0, 3.5])
def test_sharpness_is_recovered_by_maximum_likelihood(gamma):
    picks = _draw_picks(gamma, 4000, 5, 4096)
    fit = sharpness(picks, 5, 4096)
    assert fit == pytest.approx(gamma, rel=0.12)
    assert pick_loglik(picks, 5, 4096, fit) >= pick_loglik(picks, 5, 4096, gamma * 2) - 1e-9
    assert sharpness([], 5, 4096) == 1.0


def test_beta_concentration_and_shares_come_from_the_logs_moments():
    rng = np.random.default_rng(1)
    x = rng.beta(0.4 * 3.0, 0.6 * 3.0, size=20000)
    log = ConfidenceLog(top1=[len(x), float(x.sum()), float((x * x).sum())],
                        rank_mass=[float(x.sum()), 0.2 * float((1 - x).sum()), 0.1 * float((1 - x).sum())])
    assert top1_concentration(log) == pytest.approx(3.0, rel=0.05)
    assert rank_shares(log, 8) == pytest.approx((0.2, 0.1))
    assert rank_shares(log, 2) == pytest.approx((0.2,))
    run = run_shape(log, 3, 4096)
    assert run["top1_mean"] == pytest.approx(0.4, abs=0.01) and run["sharpness"] == 1.0  # no picks: calibrated
    few = ConfidenceLog(top1=[3, 2.7, 2.43])
    assert group_shape(few, run) == run  # too few nodes: the run's own
    assert group_shape(log, {**run, "top1_mean": 0.9})["top1_mean"] == pytest.approx(0.4, abs=0.01)


def test_confidence_fit_solves_the_top1_mean_under_the_measured_shape_else_the_sharpness():
    from validation.measure import confidence_fit
    scheme = SimpleNamespace(name="eagle2", max_depth=4, topk=4, tree_tokens=12, head=SimpleNamespace(vocab=256))
    shape = {"top1_mean": 0.4, "top1_concentration": 2.0, "sharpness": 3.0, "shares": [0.2, 0.1, 0.05]}
    kw = {"top1_concentration": 2.0, "shares": (0.2, 0.1, 0.05), "vocab": 256}
    fit = confidence_fit(scheme, 4.0, copy.deepcopy(shape))
    assert fit["sharpness"] == 3.0 and fit["shares"] == shape["shares"] and fit["top1_mean"] != 0.4
    assert confidence_tau(fit["top1_mean"], 4, 4, 12, sharpness=3.0, **kw) == pytest.approx(4.0, abs=0.03)
    floor = confidence_tau(0.01, 4, 4, 12, sharpness=3.0, **kw)
    low = confidence_fit(scheme, floor - 0.5, copy.deepcopy(shape))  # below what the top-1 mean can give
    assert low["top1_mean"] == 0.4 and low["sharpness"] < 3.0
    assert confidence_tau(0.4, 4, 4, 12, sharpness=low["sharpness"], **kw) == pytest.approx(floor - 0.5, abs=0.03)
    assert set(confidence_fit(scheme, 3.0, None)) == {"top1_mean"}  # no record: the calibrated model
