"""validation.request_counts: a scheme's measured acceptance by request, kept as a file that
gives back the same counts and so the same fitted acceptance."""
import gzip
from dataclasses import replace
from types import SimpleNamespace

import pytest

from engine.confidence_log import ConfidenceLog
from sim.errors import SpecError
from validation.request_counts import RequestCounts, read_counts, write_counts

CHAIN = SimpleNamespace(name="eagle", tree_nodes=None)


def a_pass(shift: int) -> SimpleNamespace:
    """One engine pass's results (the fields RequestCounts reads) over four requests."""
    log = ConfidenceLog()
    log.record({-1: [0.6, 0.3], 0: [0.9]}, {-1: [5, 7], 0: [9]}, [5, 9], [0])
    return SimpleNamespace(
        by_request={i: ({(3, (i + shift) % 4): 2 + i, (3, 0): 1}, {(1, 0): 1 + i}) for i in range(4)},
        uncut={i: {(3, (i + shift) % 4): 1 + i} for i in range(4)},
        confidence={i: log for i in range(2)},
        tries={i: (6 + i, 3 + i) for i in range(4)})


def test_passes_add_up_and_repeats_count_as_one_realization():
    counts = RequestCounts()
    for shift in (0, 0, 1):
        counts.add(a_pass(shift))
    assert counts.per_request[2][0] == {(3, 2): 8, (3, 3): 4, (3, 0): 3}
    assert counts.tries[1] == (21, 12) and counts.totals() == (sum(3 * (6 + i) for i in range(4)), sum(3 * (3 + i) for i in range(4)))
    assert sorted(counts.passes[0].values()) == [1, 2]
    assert counts.confidence[0].top1[0] == 6 and 3 not in counts.confidence


def test_the_file_gives_back_the_counts_and_the_fit(tmp_path):
    counts = RequestCounts()
    for shift in (0, 1, 1, 2):
        counts.add(a_pass(shift))
    write_counts(tmp_path / "counts-eagle.json", counts, "eagle", "a test")
    path = tmp_path / "counts-eagle.json.gz"  # packed, as compare writes it: the same document
    write_counts(path, counts, "eagle", "a test")
    assert gzip.decompress(path.read_bytes()).decode() == (tmp_path / "counts-eagle.json").read_text()
    label, source, back = read_counts(path)
    assert (label, source) == ("eagle", "a test")
    assert back.per_request == counts.per_request and back.tries == counts.tries and back.uncut == counts.uncut
    assert {i: sorted(c.values()) for i, c in back.passes.items()} == {i: sorted(c.values()) for i, c in counts.passes.items()}
    assert back.confidence == counts.confidence and back.confidence[1].picks  # EAGLE-2's record, field by field
    # fitted as a chain, the record aside (an EAGLE-2 fit takes 13 s a group)
    back, counts = replace(back, confidence={}), replace(counts, confidence={})
    for how in (True, False, None):
        assert back.acceptance_doc(CHAIN, "a test", how) == counts.acceptance_doc(CHAIN, "a test", how)
    assert counts.acceptance_doc(CHAIN, "x")["dispersion"]["by_request"] is True
    assert "dispersion" not in counts.acceptance_doc(CHAIN, "x", None)


def test_no_drafted_step_fits_nothing():
    counts = RequestCounts()
    counts.add(SimpleNamespace(by_request={0: ({}, {})}, uncut={}, confidence={}, tries={0: (5, 0)}))
    assert counts.acceptance_doc(CHAIN, "x") is None


@pytest.mark.parametrize("text, where", [("not json", ""), ('{"scheme": "a"}', ""),
                                         ('{"scheme": "a", "requests": {"x": {}}}', "requests.x"),
                                         ('{"scheme": "a", "requests": {"3": {"tries": [1]}}}', "requests.3")])
def test_a_broken_file_names_what_is_wrong(tmp_path, text, where):
    path = tmp_path / "counts-a.json"
    path.write_text(text)
    with pytest.raises(SpecError) as err:
        read_counts(path)
    assert str(path) in str(err.value) and where in str(err.value)
