"""Price a stored comparison again under another hardware profile: the simulator's side of
`python -m validation compare` run anew from what the comparison kept (its sim-trace.yaml, the
engine's report, its acceptance files), the engine not run again.

    python -m validation reprice DIR --hardware PROFILE --out OUT [--engine REPORT] [--draws N]
                                 [--refit {request,common,none}]

For a comparison whose engine ran where device time was short (a lent GPU) and whose profile
was measured again later, or to see how a change to one figure moves every error. `--engine`
takes the engine's report of another run of the same trace (default DIR/engine/report.json).
The engine's side is DIR/engine-pooled.json where compare wrote it (since 0.33.0: its runs
pooled, with the accepted-drafts histograms counted as the simulator counts them), else
DIR/engine/report.json (one run; no acceptance distances). An engine-pooled.json written
before 0.44.0 has no per-run p99s; they are read from DIR/engine/runN/report.json where every
run's is kept (with_run_p99). The acceptance files are read from DIR by name (acceptance-<label>.json), wherever the trace
said they were when the comparison was made, so a comparison made on another machine reprices
here.

`--refit` fits the acceptance files again, into OUT, from the engine's counts by request that
the comparison kept (DIR/counts-<label>.json.gz, validation/request_counts.py; compare writes them
since 0.46.0), with this version's fit: `request` shrinks each request's counts by its own factor
(validation/dispersion.py, compare's default), `common` by one factor for all (0.45.0), `none`
not at all. The same engine runs then price every way of fitting, side by side.

Without engine-pooled.json it reads comparisons of one engine run (compare --repeats 1):
pooling several runs needs their per-request results, which a comparison's directory does not
keep. Its comparison has no host speeds or step-time ratios by query tokens (those come from
the engine's in-memory results); its errors are compare's for the same inputs (the simulator's
draws are seeded by their index, as many as compare's default: 4 for each engine run pooled).
"""
from __future__ import annotations

import json
from pathlib import Path

import yaml

from sim.errors import SpecError
from sim.report import run_tag
from validation.compare import errors, plot_comparison, simulate
from validation.pooling import median_present
from validation.request_counts import COUNTS_NAMES, counts_path, read_counts

REFITS = {"request": True, "common": False, "none": None}  # --refit -> RequestCounts.acceptance_doc's by_request


def _engine_report(path: Path) -> dict:
    if not path.is_file():
        raise SpecError(str(path), "", "no engine report here: expected the report.json that "
                        "`python -m engine run` (or compare --repeats 1) wrote")
    try:
        doc = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise SpecError(str(path), "", f"not JSON ({exc})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("runs"), list) or not doc["runs"]:
        raise SpecError(str(path), "runs", "expected an engine report with a non-empty list of runs")
    return doc


def with_run_p99(report: dict, compared: Path) -> dict:
    """`report` (compared/engine-pooled.json) with each run's `run_p99` (validation.pooling.pool_runs,
    since 0.44.0) taken, where it lacks them, from the runs' own reports kept under
    compared/engine/runN: the median over the runs of each one's TTFT and TPOT p99. Left as it
    is where any run's report is missing; the errors then read the p99s pooled on both sides."""
    runs = report["runs"]
    n = int(runs[0]["summary"].get("pooled_runs", 1))
    paths = [compared / "engine" / f"run{i + 1}" / "report.json" for i in range(n)]
    if all("run_p99" in r["summary"] for r in runs) or n < 2 or not all(p.is_file() for p in paths):
        return report
    kept = [{run_tag(r["label"], r["concurrency"]): r["summary"] for r in _engine_report(p)["runs"]} for p in paths]
    out = []
    for r in runs:
        per = [k.get(run_tag(r["label"], r["concurrency"])) for k in kept]
        if any(x is None for x in per):
            return report
        p99 = {key: median_present([x[key]["p99"] for x in per]) for key in ("ttft_s", "tpot_s")}
        out.append({**r, "summary": {**r["summary"], "run_p99": p99}})
    return {**report, "runs": out}


def reprice_doc(compared: Path, hardware: Path) -> dict:
    """compared/sim-trace.yaml with its hardware `hardware` and each measured acceptance file
    read from `compared` by its name."""
    path = compared / "sim-trace.yaml"
    if not path.is_file():
        raise SpecError(str(path), "", "no sim-trace.yaml here: expected the directory of a "
                        "`python -m validation compare` run")
    if not hardware.is_file():
        raise SpecError(str(hardware), "", "no such hardware profile (expected a YAML file "
                        "that `python -m validation.calibrate` wrote)")
    doc = yaml.safe_load(path.read_text())
    doc["hardware"] = str(hardware.resolve())
    for i, entry in enumerate(doc.get("speculation", [])):
        measured = (entry.get("acceptance") or {}).get("measured")
        if measured is None:
            continue
        local = compared / Path(measured).name
        if not local.is_file():
            raise SpecError(str(path), f"speculation[{i}].acceptance.measured",
                            f"{Path(measured).name} is not in {compared}")
        entry["acceptance"] = {"measured": str(local.resolve())}
    return doc


def refitted(compared: Path, doc: dict, out: Path, how: str) -> dict:
    """`doc` (a reprice_doc) with each scheme's acceptance fitted again from its counts file in
    `compared` (counts-<label>.json.gz, or unpacked) into out/acceptance-<label>.json (`how`: a
    key of REFITS); SpecError where a scheme with measured acceptance has no counts file."""
    from sim.spec import load_trace

    path = out / "sim-trace.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    schemes = {s.label: s for s in load_trace(path).speculation}
    for entry in doc.get("speculation", []):
        if (entry.get("acceptance") or {}).get("measured") is None:
            continue
        label = entry.get("label", entry["scheme"])
        found = counts_path(compared, label)
        if found is None:
            raise SpecError(str(compared / COUNTS_NAMES[0].format(label)), "", "no request counts here to refit "
                            "from (compare keeps them since 0.46.0); reprice without --refit")
        _, source, counts = read_counts(found)
        fitted = counts.acceptance_doc(schemes[label], source, REFITS[how])
        if fitted is None:
            raise SpecError(str(found), "requests", "no step drafted: nothing to fit")
        local = out / f"acceptance-{label}.json"
        local.write_text(json.dumps(fitted))
        entry["acceptance"] = {"measured": str(local.resolve())}
    return doc


def reprice(compared: Path, hardware: Path, out: Path, engine: Path | None = None, draws: int | None = None,
            progress: bool = False, refit: str | None = None) -> dict:
    """The comparison of `compared` priced under profile `hardware` (its errors against the
    engine's report `engine`, default compared/engine-pooled.json, else compared/engine/report.json),
    written to out/comparison.json; `refit` (a key of REFITS): the acceptance fitted again
    (`refitted`)."""
    pooled = compared / "engine-pooled.json"
    if engine is None and pooled.is_file():
        engine = pooled
    elif engine is None and (compared / "engine" / "run1").is_dir():
        raise SpecError(str(compared / "engine"), "",
                        "this comparison pooled several engine runs (compare --repeats N) and kept no "
                        "engine-pooled.json; reprice reads one: name one run's report with --engine")
    engine = engine or compared / "engine" / "report.json"
    engine_report = _engine_report(engine)
    if engine == pooled:
        engine_report = with_run_p99(engine_report, compared)
    doc = reprice_doc(compared, hardware)
    out.mkdir(parents=True, exist_ok=True)
    if refit is not None:
        doc = refitted(compared, doc, out, refit)
    sim_path = out / "sim-trace.yaml"
    sim_path.write_text(yaml.safe_dump(doc, sort_keys=False))
    runs = int(engine_report["runs"][0]["summary"].get("pooled_runs", 1))  # the engine runs pooled
    sim_report, _ = simulate(sim_path, out, runs, draws, progress)  # drawn and grouped as compare does
    known = {(r["label"], r["concurrency"]) for r in sim_report["runs"]}
    missing = [f"{r['label']} at {r['concurrency']}" for r in engine_report["runs"]
               if (r["label"], r["concurrency"]) not in known]
    if missing:
        raise SpecError(str(engine), "runs",
                        f"runs the trace does not have: {', '.join(missing)}")
    if "throughputs" not in engine_report["runs"][0]:  # a run's own report, not compare's pooled one:
        # its acceptance histograms count the engine's plans, not drafts as the simulator counts
        # them (validation.measure.drafted_counts, from results a report does not keep): left out
        engine_report = {**engine_report, "runs": [{k: v for k, v in r.items() if k != "acceptance"}
                                                   for r in engine_report["runs"]]}
    comparison = errors(engine_report, sim_report)
    comparison["repriced"] = {"comparison": str(compared), "hardware": str(hardware), "engine": str(engine),
                              "refit": refit}
    (out / "comparison.json").write_text(json.dumps(comparison, indent=1) + "\n")
    plot_comparison(comparison, out / "comparison.png", f"{doc.get('name', compared.name)} (repriced)")
    return comparison
