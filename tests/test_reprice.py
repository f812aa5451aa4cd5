"""validation.reprice: a stored comparison priced again under another profile, the engine not
rerun. The same profile gives compare's errors; a dearer profile moves them; the directory can
move; compare --engine-only leaves it the engine's side; bad input exits 2 naming what is wrong."""
import gzip
import json
import shutil
from pathlib import Path

import pytest
import yaml

from tests.helpers import tiny_engine_trace
from validation.__main__ import main
from validation.compare import compare
from validation.reprice import reprice

ROOT = Path(__file__).resolve().parents[1]
PROFILE = ROOT / "traces" / "hardware" / "cpu-measured.yaml"

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def compared(tmp_path_factory):
    """One compare run of a tiny trace (plain decoding and prompt lookup at concurrency 1 and 2)."""
    tmp = tmp_path_factory.mktemp("reprice")
    trace = tiny_engine_trace(tmp, requests=4, prompt=24, output=8, k=3, sweep={"concurrency": [1, 2]})
    out = tmp / "cmp"
    compare(trace, out, PROFILE, warmup=0)
    return out


def errors_of(doc: dict) -> dict:
    return {(r["label"], r["concurrency"]): r["errors"] for r in doc["runs"]}


def test_the_same_profile_gives_compares_errors(compared, tmp_path):
    got = reprice(compared, PROFILE, tmp_path / "again")
    want = json.loads((compared / "comparison.json").read_text())
    assert errors_of(got).keys() == errors_of(want).keys() and len(got["runs"]) == 4
    for key, err in errors_of(want).items():
        for metric, value in err.items():
            assert (errors_of(got)[key][metric] or 0.0) == pytest.approx(value or 0.0, abs=1e-12), (key, metric)
    assert (tmp_path / "again" / "comparison.json").exists() and (tmp_path / "again" / "comparison.png").exists()
    # the pooled engine report keeps the accepted-drafts histograms as compare counts them
    tv = {(r["label"], r["concurrency"]): r["acceptance"]["tv_distance"] for r in want["runs"] if "acceptance" in r}
    assert tv and tv == {(r["label"], r["concurrency"]): r["acceptance"]["tv_distance"] for r in got["runs"]
                         if "acceptance" in r}
    # what only the engine's in-memory results give is left out rather than guessed
    assert all("engine_speed" not in r for r in got["runs"])
    assert got["repriced"]["hardware"] == str(PROFILE)
    assert got["repriced"]["engine"] == str(compared / "engine-pooled.json")


def test_a_runs_own_report_prices_without_acceptance_distances(compared, tmp_path):
    """Without engine-pooled.json (a comparison from before 0.33.0) the run's own report is read;
    its histograms count the engine's plans, not drafts as the simulator does: left out."""
    d = tmp_path / "old"
    shutil.copytree(compared, d)
    (d / "engine-pooled.json").unlink()
    got = reprice(d, PROFILE, tmp_path / "out")
    want = errors_of(json.loads((compared / "comparison.json").read_text()))
    assert all("acceptance" not in r for r in got["runs"])
    assert {k: v["throughput_tok_s"] for k, v in errors_of(got).items()} == \
        pytest.approx({k: v["throughput_tok_s"] for k, v in want.items()}, abs=1e-12)


def test_an_engine_only_comparison_of_several_runs_is_priced_here(tmp_path):
    """compare --engine-only writes the engine's side and stops; reprice pools the simulator's
    draws as compare would for that many engine runs (4 each)."""
    trace = tiny_engine_trace(tmp_path, requests=2, prompt=16, output=4, k=2)
    out = tmp_path / "cmp"
    got = compare(trace, out, PROFILE, warmup=0, repeats=2, engine_only=True)
    assert got["engine_only"] == str(out)
    assert (out / "sim-trace.yaml").exists() and (out / "engine-pooled.json").exists()
    assert not (out / "comparison.json").exists() and not (out / "sim").exists()
    priced = reprice(out, PROFILE, tmp_path / "priced")
    assert {r["label"] for r in priced["runs"]} == {"none", "ngram"}
    assert all(len(r["engine_throughputs"]) == 2 for r in priced["runs"])
    assert (tmp_path / "priced" / "sim" / "draw8" / "report.json").exists()
    assert not (tmp_path / "priced" / "sim" / "draw9").exists()
    # the p99s are read run by run on both sides
    assert all(r["p99_over"] == "runs" for r in priced["runs"])
    # an engine-pooled.json from before 0.44.0 has no run_p99: the runs' own reports give them
    pooled = json.loads((out / "engine-pooled.json").read_text())
    for r in pooled["runs"]:
        del r["summary"]["run_p99"]
    (out / "engine-pooled.json").write_text(json.dumps(pooled))
    again = reprice(out, PROFILE, tmp_path / "again")
    assert [r["engine"] for r in again["runs"]] == [pytest.approx(r["engine"], abs=1e-12) for r in priced["runs"]]
    assert all(r["p99_over"] == "runs" for r in again["runs"])
    # with a run's report missing, both sides read their p99s pooled
    (out / "engine" / "run2" / "report.json").unlink()
    lacking = reprice(out, PROFILE, tmp_path / "lacking")
    assert all(r["p99_over"] == "pooled" for r in lacking["runs"])
    assert all(r["errors"]["tpot_p99"] == r["errors"]["tpot_p99_pooled"] for r in lacking["runs"])


def test_a_dearer_step_lengthens_every_priced_step(compared, tmp_path):
    doc = yaml.safe_load(PROFILE.read_text())
    doc["step_overhead_us"] = doc["step_overhead_us"] + 2000.0
    dear = tmp_path / "dear.yaml"
    dear.write_text(yaml.safe_dump(doc))
    base = errors_of(json.loads((compared / "comparison.json").read_text()))
    got = errors_of(reprice(compared, dear, tmp_path / "dear"))
    for key in base:
        assert got[key]["step_time"] > base[key]["step_time"] + 0.05, key
        assert got[key]["throughput_tok_s"] < base[key]["throughput_tok_s"], key
        assert got[key]["steps"] == pytest.approx(base[key]["steps"], abs=0.02), key  # the same schedule


def test_a_moved_comparison_reads_its_acceptance_by_name(compared, tmp_path):
    moved = tmp_path / "moved"
    shutil.copytree(compared, moved)
    trace = yaml.safe_load((moved / "sim-trace.yaml").read_text())
    lookup = trace["speculation"][1]["acceptance"]["measured"]
    trace["speculation"][1]["acceptance"]["measured"] = "/elsewhere/on/another/machine/" + Path(lookup).name
    (moved / "sim-trace.yaml").write_text(yaml.safe_dump(trace, sort_keys=False))
    got = reprice(moved, PROFILE, tmp_path / "out")
    sim_trace = yaml.safe_load((tmp_path / "out" / "sim-trace.yaml").read_text())
    assert sim_trace["speculation"][1]["acceptance"]["measured"] == str((moved / Path(lookup).name).resolve())
    assert len(got["runs"]) == 4


def test_another_runs_engine_report_is_priced_against(compared, tmp_path):
    report = json.loads((compared / "engine" / "report.json").read_text())
    for r in report["runs"]:  # a run of the same trace on a host twice as slow
        r["summary"]["duration_s"] *= 2
        r["summary"]["throughput_tok_s"] /= 2
    slow = tmp_path / "slow.json"
    slow.write_text(json.dumps(report))
    base = errors_of(json.loads((compared / "comparison.json").read_text()))
    got = errors_of(reprice(compared, PROFILE, tmp_path / "out", engine=slow))
    for key, err in base.items():
        assert 1 + got[key]["throughput_tok_s"] == pytest.approx(2 * (1 + err["throughput_tok_s"]), rel=1e-9)


@pytest.mark.parametrize("case, where", [
    ("no-trace", "sim-trace.yaml"), ("no-profile", "nowhere.yaml"), ("no-report", "report.json"),
    ("no-acceptance", "speculation[1].acceptance.measured"), ("several-runs", "engine"),
    ("foreign-report", "runs"),
])
def test_bad_input_exits_2_naming_it(compared, tmp_path, capsys, case, where):
    d = tmp_path / "cmp"
    shutil.copytree(compared, d)
    profile, extra = PROFILE, []
    if case == "no-trace":
        (d / "sim-trace.yaml").unlink()
    elif case == "no-profile":
        profile = tmp_path / "nowhere.yaml"
    elif case == "no-report":
        (d / "engine-pooled.json").unlink()
        (d / "engine" / "report.json").unlink()
    elif case == "no-acceptance":
        (d / "acceptance-ngram.json").unlink()
    elif case == "several-runs":  # pooled runs without the pooled report (before 0.33.0)
        (d / "engine-pooled.json").unlink()
        (d / "engine" / "run1").mkdir()
    else:  # a report of runs the trace does not have
        report = json.loads((d / "engine" / "report.json").read_text())
        report["runs"][0]["label"] = "eagle"
        (tmp_path / "other.json").write_text(json.dumps(report))
        extra = ["--engine", str(tmp_path / "other.json")]
    rc = main(["reprice", str(d), "--hardware", str(profile), "--out", str(tmp_path / "out"), *extra])
    err = capsys.readouterr().err
    assert rc == 2 and where in err and "Traceback" not in err


def test_refit_from_the_kept_counts(compared, tmp_path):
    """compare keeps each scheme's counts by request; --refit request fits them as compare did
    (the same file, the same errors); common and none fit them otherwise and say so."""
    assert (compared / "counts-ngram.json.gz").exists() and not list(compared.glob("counts-none*"))
    got = reprice(compared, PROFILE, tmp_path / "request", refit="request")
    assert json.loads((tmp_path / "request" / "acceptance-ngram.json").read_text()) == \
        json.loads((compared / "acceptance-ngram.json").read_text())
    sim_trace = yaml.safe_load((tmp_path / "request" / "sim-trace.yaml").read_text())
    assert sim_trace["speculation"][1]["acceptance"]["measured"] == str((tmp_path / "request" / "acceptance-ngram.json").resolve())
    want = errors_of(json.loads((compared / "comparison.json").read_text()))
    assert {k: v["throughput_tok_s"] for k, v in errors_of(got).items()} == \
        pytest.approx({k: v["throughput_tok_s"] for k, v in want.items()}, abs=1e-12)
    assert got["repriced"]["refit"] == "request"
    reprice(compared, PROFILE, tmp_path / "none", refit="none")
    assert "dispersion" not in json.loads((tmp_path / "none" / "acceptance-ngram.json").read_text())
    reprice(compared, PROFILE, tmp_path / "common", refit="common")
    assert json.loads((tmp_path / "common" / "acceptance-ngram.json").read_text())["dispersion"]["by_request"] is False


@pytest.mark.parametrize("case, where", [("missing", "counts-ngram.json.gz"), ("garbled", "requests.0"),
                                         ("truncated", "counts-ngram.json.gz")])
def test_refit_without_usable_counts_exits_2_naming_them(compared, tmp_path, capsys, case, where):
    d = tmp_path / "cmp"
    shutil.copytree(compared, d)
    packed = d / "counts-ngram.json.gz"
    if case == "missing":
        packed.unlink()
    elif case == "truncated":
        packed.write_bytes(packed.read_bytes()[:40])
    else:  # unpacked (as 0.46.0's first comparisons wrote them), with a row short of its count
        doc = json.loads(gzip.decompress(packed.read_bytes()))
        doc["requests"]["0"]["hist"] = [[1, 2]]
        packed.unlink()
        (d / "counts-ngram.json").write_text(json.dumps(doc))
    rc = main(["reprice", str(d), "--hardware", str(PROFILE), "--out", str(tmp_path / "out"), "--refit", "request"])
    err = capsys.readouterr().err
    assert rc == 2 and where in err and "Traceback" not in err
