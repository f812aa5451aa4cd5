"""validation.split: an engine step split into drafting, the target's forward (in the run and
bare) and the rest, each beside the simulator's price for it."""
import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from validation.split import split, steady

pytestmark = pytest.mark.usefixtures("one_torch_thread")

ROOT = Path(__file__).resolve().parents[1]
TRACE = {
    "version": 1, "name": "split-small", "seed": 5, "hardware": "cpu", "model": "tiny",
    "serving": {"max_num_seqs": 8, "max_num_batched_tokens": 1024, "page_size": 16, "kv_pages": 512,
                "paging": "indexshare"},
    "workload": {"requests": 4, "arrival": {"process": "closed", "concurrency": 2},
                 "prompt_tokens": {"dist": "fixed", "value": 32}, "output_tokens": {"dist": "fixed", "value": 24},
                 "temperature": 0.0},
    "speculation": [{"scheme": "none"}, {"scheme": "eagle", "depth": 3}],
    "engine": {"checkpoint": {"random_shape": "tiny", "layers": 2}, "backend": "torch", "device": "cpu"},
}


def test_steady_steps_are_full_decodes_at_the_common_width():
    # step 0 prefills, 1 has one sequence, 4 is a chain cut short near the end
    cols = {"batch_size": np.array([2, 1, 2, 2, 2, 2]), "prefill_tokens": np.array([32, 0, 0, 0, 0, 0]),
            "query_tokens": np.array([34, 4, 8, 8, 5, 8])}
    assert steady(cols) == [2, 3, 5]


def test_split_parts_add_up_and_are_priced(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(TRACE))
    res = split(path, tmp_path / "out", ROOT / "traces" / "hardware" / "cpu-measured.yaml", rounds=1,
                progress=lambda msg: None)
    assert json.loads((tmp_path / "out" / "split.json").read_text())["schemes"].keys() == {"none", "eagle"}
    assert res["concurrency"] == 2
    for label, runs in res["runs"].items():
        (run,) = runs
        assert run["steps"] and run["bare"], label
        assert run["batch"] == 2 and run["query_tokens"] == 2 * (1 + (3 if label == "eagle" else 0))
        for s in run["steps"]:
            assert s["draft"] + s["forward"] + s["rest"] == pytest.approx(s["step"])
            assert s["forward"] > 0 and s["rest"] > 0 and s["bare_priced"] > 0 and s["rest_priced"] > 0
            assert (s["draft"] > 0) == (label == "eagle")
        assert all(b["bare"] > 0 for b in run["bare"])
        s = res["schemes"][label]
        # the simulator's target part is the bare price plus the priced rest, against the engine's
        want = (s["bare_priced"] + s["rest_priced"]) / (s["forward"] + s["rest"])
        assert s["target_priced_over_engine"] == pytest.approx(want)
        # run by run: one run here, whose medians are the scheme's
        assert s["forward_by_run"] == [pytest.approx(s["forward"])]
        assert s["target_priced_over_engine_by_run"] == [pytest.approx(want)]
        # the same forward, bare and in the run, reads within a factor of three on any host
        assert 1 / 3 < s["inrun_over_bare"] < 3 and 1 / 3 < s["priced_over_bare"] < 3


@pytest.mark.parametrize("extra, message", [(["--rounds", "0"], "--rounds must be at least 1"),
                                            (["--concurrency", "0"], "--concurrency must be at least 1")])
def test_bad_arguments_are_usage_errors(tmp_path, extra, message, capsys):
    from validation.__main__ import main
    with pytest.raises(SystemExit) as exc:
        main(["split", "traces/engine-tiny.yaml", "--out", str(tmp_path / "o"), *extra])
    assert exc.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_missing_trace_is_a_clean_error(tmp_path, capsys):
    from validation.__main__ import main
    assert main(["split", str(tmp_path / "none.yaml"), "--out", str(tmp_path / "o")]) == 2
    assert "trace file not found" in capsys.readouterr().err


@pytest.mark.slow
def test_split_prices_under_its_own_calibration(tmp_path):
    """With calibrate, the probes run between the engine's runs and the steps are priced under
    the profile they measured, written beside split.json."""
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump({**TRACE, "speculation": [{"scheme": "none"}]}))
    res = split(path, tmp_path / "out", rounds=1, calibrate=True, cycles=1, progress=lambda msg: None)
    profile = tmp_path / "out" / "measured-hardware.yaml"
    assert res["hardware"] == str(profile) and "Measured by" in profile.read_text()
    s = res["schemes"]["none"]
    assert s["steady_steps"] > 0 and 1 / 3 < s["priced_over_bare"] < 3


def test_cycles_go_with_calibrate(tmp_path, capsys):
    from validation.__main__ import main
    with pytest.raises(SystemExit) as exc:
        main(["split", "traces/engine-tiny.yaml", "--out", str(tmp_path / "o"), "--cycles", "2"])
    assert exc.value.code == 2 and "--cycles must be at least 1, and goes with --calibrate" in capsys.readouterr().err
