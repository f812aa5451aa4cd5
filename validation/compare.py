"""End to end: one trace through the engine and the simulator, and how far apart they are
(DESIGN.md §8.4): `python -m validation compare traces/x.yaml --out DIR [--hardware PROFILE]`.

1. The engine runs the trace (its report under DIR/engine), `--repeats N` times (under
   DIR/engine/runN), the schemes' order rotated from run to run (validation/pooling.py's
   `rotated`); each scheme and concurrency is compared with its runs pooled as if they had run
   end to end (`pool_runs`: all tokens over all their time, latency percentiles over all their
   requests; beside them each run's own TTFT and TPOT p99 and their median over the runs, which
   the p99 errors compare: point 4), and every run's throughput is kept in the comparison
   ("engine_throughputs"), with the relative standard error of the pooled throughput they give
   ("engine_spread", printed as `engine ±`: an error within about twice it is within the
   engine's own run-to-run noise), and the error of the median draw's throughput against the
   median run's ("median_run_throughput", printed as `median run`, since 0.57.0: a pooled error
   that this one lacks came from one or two slow runs, one that both show is shared by the runs,
   the price's or the host's level through all of them). The pooled report is kept as
   DIR/engine-pooled.json; with `--engine-only` the comparison stops there, its acceptance
   files and DIR/sim-trace.yaml written, for `python -m validation reprice` to price later.
   With `--calibrate`, validation.calibrate's probes (their host work amid the memory traffic
   of the model the engine runs: validation.traffic) run a few at a time
   before each scheme's run (`--cycles` cycles of them per engine run of the trace, by default
   CALIBRATION_CYCLES, each call its exact share; the last cycle completed at the end), and the simulator is priced with the profile they measure
   (DIR/measured-hardware.yaml): on a host whose speed swings by up to 1.8x in spells of about
   ten seconds, a profile measured at other moments mispredicts every scheme alike.
2. Acceptance the trace leaves out is filled from the engine's own measurement, pooled over the
   scheme's runs (validation/measure.py): per-depth rates a_j = P(accept depth j | drafted to
   depth j, depths < j accepted) for chains, per-rank rates for static trees, a fitted confidence
   model for EAGLE-2 (fitted to the steps whose drafts the sequence's end did not cut short:
   EngineResult.uncut); written to DIR/acceptance-<label>.json and read as `{measured: ...}`.
   Prompts differ in how predictable they are, and a run lasts as long as its slowest requests:
   the requests are cut into groups of validation.measure.GROUP_SIZE (1: each its own) by their tokens per step (over
   every run: the same prompts each time) and the file holds a `mixture` of the groups' forms,
   one drawn per simulated request (validation.measure.grouped_profile). A request's counts are
   one realization (at temperature 0 every run repeats it), which the simulator's draws would
   add their own noise to: each request's deviation from the pooled is first scaled so that the
   requests' forms spread as their true rates do, each request's by its own factor
   (validation/dispersion.py; the file's `dispersion` records them). The counts themselves are
   kept too, DIR/counts-<label>.json.gz (validation/request_counts.py), for `reprice --refit`.
   They are measured over the steps that drafted. A sequence-step that could draft (depth above
   0, more than one token left) and did not (no prompt-lookup match) gives prompt lookup its
   measured `match` rate instead, the probability with which the simulator's sequences draft:
   each group's own (its requests then grouped by their tokens per such step), the pooled rate
   as the scheme's.
3. The simulator runs the same trace on the model the engine actually ran, priced with a
   measured hardware profile (default traces/hardware/cpu-measured.yaml, from
   `python -m validation.calibrate`); its report goes under DIR/sim. It runs `--draws` of its own
   draws (default DRAW_GROUPS x --repeats; sim.simulator.draw_seed: acceptance samples and, where
   the profile has speed_rates, the device's spells; the same requests) under DIR/sim/drawN,
   pooled as the engine's runs are: a profile with speed spells gives each run's latencies their
   spread, and one draw's p99 of a few requests is mostly chance. Its TTFT and TPOT percentiles
   are the mean of those of groups of as many draws as the engine's runs (`group_percentiles`:
   a percentile's estimate moves with the requests behind it), the rest over all its draws; its
   draws' own p99s have their median taken as the engine's runs' have.
4. For every scheme and concurrency: the signed relative error (sim - engine) / engine of
   throughput, TTFT p50/p99, TPOT p50/p99, steps, mean step time (duration / steps), mean
   drafting time per step (the engine times its planner's `plan` call and its hand-off of the
   target's features, the simulator reports its drafter price), allocator operations and peak
   pages, printed, written to DIR/comparison.json
   and drawn in DIR/comparison.png. The p99s (since 0.44.0) are a run's: each engine run's own
   p99, the median over the runs, against the same over the simulator's draws; the p99 over
   every run's requests pooled is kept beside them as `ttft_p99_pooled` and `tpot_p99_pooled`.
   Pooled, a p99 is the tail of the slowest run: in 0.43.0's comparisons every TPOT p99 miss
   sat where one or two of eight engine runs ran 1.3-1.6x slower than the rest, a spread run to
   run the simulator's speed spells do not reach (its groups of eight draws 1.14-1.32x).
   Steps and step time split a throughput error into its two factors: with the same tokens
   generated, 1 + throughput error = 1 / ((1 + steps error)(1 + step time error)); steps
   follow the schedule and the acceptance, step time the cost model, and drafting time says
   how much of a step-time error is the drafter's.
5. Warm-up: before the timed runs the engine runs the trace `--warmup` times (default 1; under
   DIR/engine/warmupN, kept out of everything compared). The process's first pass over the
   trace's step shapes runs slower (per-shape setup in the matmul library and fresh memory for
   new tensor sizes are the likely causes, not yet told apart): at concurrency 4 every
   speculative scheme's first run took 40-60% longer a step than its next three (prompt lookup
   11.5 ms against 7.1-8.0), `none`'s 14-22%, which read as the simulator 5-15% short once pooled.
6. The host's speed: after every engine step, outside the engine's clock, a reference loop
   (validation.timing.host_reference, about 0.2 ms; since 0.38.0 one that makes no objects: the
   loop before it read the host 5.6% faster after the probes than after an engine run where
   real host work read no difference) runs twice and the second is timed
   (validation.timing.settled_reference: the first pays for the step's use of the caches); a
   run's speed is the mean of its calls' inverses, weighted by their steps' durations (its work
   over its time; until 0.21.0 the inverse of the calls' weighted mean, which weights the slow
   calls twice over and read the fourth VM's runs 3.7% slower). With `--calibrate` the same
   loop is timed (after one untimed call) before and after each call of the probes
   (`timed_ticks`, validation/host_speed.py), weighted by the probes' seconds: the speed the
   profile describes. Each entry gives the speed during its scheme's runs over that (`engine_speed`; without probes, over the engine runs' mean) and the errors
   had the engine run at that speed (`at_mean_speed`); `probe_speed` in comparison.json is
   the probes' speed over the engine runs' (+0.05: the profile was measured 5% faster than
   the engine ran on average, which prices every scheme about 5% fast). `engine_run_speeds`
   gives each engine run's own (since 0.44.0, in run order), beside `engine_throughputs`: a
   run much slower than the rest with the host no slower under it was slowed by something the
   reference loop does not feel.
7. The profile's own noise (with `--calibrate`): the probes' calls are resampled with
   replacement (validation.calibrate.Calibration.bootstrap, PROFILE_RESAMPLES profiles under
   DIR/resamples), the simulator prices the trace on each at one draw, and each entry's
   `profile_spread` (`profile ±`) is its throughput's relative standard deviation over them;
   `profile_noise` in comparison.json gives each scalar figure's. An error within about twice
   the two spreads together (sqrt(engine ±² + profile ±²)) is one this comparison cannot tell
   from zero.
8. Where a step-time error lies: `step_time_by_tokens` in comparison.json (printed under the
   table), per concurrency, the simulator's step time over the engine's by query tokens a pass,
   the steps without a prefill chunk matched on scheme, batch size and tokens, drafting left out
   (validation/by_tokens.py): a ratio that falls with the tokens says a pass's fixed part and
   its growth per token are priced off in opposite directions.
9. How the step grows with the batch: `batch_scaling` in comparison.json (printed under the
   table), per scheme and concurrency above the trace's lowest, each engine run's median decode
   step at that level over at the lowest, against the simulator's draws' (validation/scaling.py).
   The ratio of two levels of one run leaves out the host's speed where the two ran at the same
   speed: each run of the trace takes a scheme's levels back to back (`scheme_major`), its
   schemes still rotated from run to run. A scaling error says the price's growth with the
   batch is off; an error at the lowest level with none in the scaling says its level is.
10. Where a drafting error lies: `draft_time_by_kind` in comparison.json (printed under the
   table), per scheme and concurrency that drafts, the simulator's drafting a step over the
   engine's at admissions (a step with a prefill chunk or right after one) and in ordinary steps,
   by mean, and for the ordinary steps by median too (validation/draft_kinds.py).
"""
from __future__ import annotations

import json
import statistics
from dataclasses import fields
from pathlib import Path

import yaml

from sim.models import ModelSpec
from sim.report import run_tag
from validation.by_tokens import ratio_by_tokens
from validation.draft_kinds import kind_line, ratio_by_kind
from validation.host_speed import engine_pairs, relative_speeds, run_speeds, timed_ticks, weighted_mean
from validation.measure import histogram_distance
from validation.pooling import figure_noise, group_percentiles, pool_runs, profile_spread, rotated, run_spread
from validation.request_counts import COUNTS_NAMES, RequestCounts, write_counts
from validation.scaling import batch_scaling

ROOT = Path(__file__).resolve().parents[1]
CALIBRATION_CYCLES = 2  # calibration probe cycles per engine run of the trace (--calibrate)
# the simulator's draws per engine run (--draws: DRAW_GROUPS x --repeats by default): one draw of a
# run whose speed spells last seconds is as variable as the engine's run (a draw's throughput
# spread 11-18% between draws, the engine's runs 6-12%), and costs a second or three
DRAW_GROUPS = 4
# bootstrap resamples of the calibration's calls (--calibrate), each priced by the simulator at one
# draw: the spread of its prediction from its profile's own noise (`profile ±`, profile_spread)
PROFILE_RESAMPLES = 8
AT_MEAN_SPEED = ("throughput_tok_s", "tpot_p50", "tpot_p99", "step_time")  # also given at the mean host speed
METRICS = ("throughput_tok_s", "ttft_p50", "ttft_p99", "tpot_p50", "tpot_p99", "ttft_p99_pooled", "tpot_p99_pooled",
           "steps", "step_time", "draft_time", "allocator_ops", "peak_pages")


def metrics(summary: dict, per_run: bool = True) -> dict:
    """The compared figures of a report's summary. `ttft_p99`/`tpot_p99` are each run's p99, the
    median over the runs (pool_runs' `run_p99`) where `per_run` and the summary has them, else
    the p99 over the requests pooled (`*_p99_pooled`, always given)."""
    a = summary["allocator"]
    tail = summary.get("run_p99") if per_run else None
    p99 = lambda key: tail[key] if tail else summary[key]["p99"]  # noqa: E731
    return {"throughput_tok_s": summary["throughput_tok_s"], "ttft_p50": summary["ttft_s"]["p50"],
            "ttft_p99": p99("ttft_s"), "tpot_p50": summary["tpot_s"]["p50"], "tpot_p99": p99("tpot_s"),
            "ttft_p99_pooled": summary["ttft_s"]["p99"], "tpot_p99_pooled": summary["tpot_s"]["p99"],
            "steps": summary["steps"],
            "step_time": summary["duration_s"] / max(1, summary["steps"]),
            "draft_time": summary["draft_s"] / max(1, summary["steps"]),
            "allocator_ops": a["page_allocs"] + a["page_frees"], "peak_pages": a["peak_pages"]}


def errors(engine: dict, sim: dict, speeds: dict[str, float] | None = None,
           profile_spreads: dict[str, float] | None = None) -> dict:
    """Signed relative errors (sim - engine) / engine, run by run (matched on label and concurrency).
    `speeds`: per run tag, the host's speed during the engine's runs over the comparison's mean
    (relative_speeds): each entry then gives it as `engine_speed` (signed: +0.1, 10% faster than
    the mean the profile describes) and `at_mean_speed`, the errors of AT_MEAN_SPEED had the
    engine run at that mean speed (its times scaled by its speed, its throughput divided by it;
    `step_time_at_mean_speed` repeats the step time's). Where the engine's report keeps its
    runs' throughputs (pool_runs), `engine_spread` is run_spread of them, and where the
    simulator's keeps its draws' too, `median_run_throughput` is the error of the median draw's
    throughput against the median run's; `profile_spread`, per
    run tag, the simulator's from its profile (profile_spread). The p99s are read per run on
    both sides where both reports have `run_p99` (pool_runs), else pooled on both (`p99_over`:
    "runs" or "pooled")."""
    sims = {(r["label"], r["concurrency"]): r for r in sim["runs"]}
    out = []
    for r in engine["runs"]:
        s = sims[(r["label"], r["concurrency"])]
        per_run = "run_p99" in r["summary"] and "run_p99" in s["summary"]
        me, ms = metrics(r["summary"], per_run), metrics(s["summary"], per_run)
        err = {k: (ms[k] - me[k]) / me[k] if me[k] and ms[k] is not None else None for k in METRICS}
        entry = {"scheme": r["scheme"], "label": r["label"], "concurrency": r["concurrency"], "errors": err,
                 "engine": me, "sim": ms, "p99_over": "runs" if per_run else "pooled"}
        speed = (speeds or {}).get(run_tag(r["label"], r["concurrency"]))
        if speed is not None:
            entry["engine_speed"] = speed - 1
            scaled = {k: me[k] / speed if k == "throughput_tok_s" else me[k] * speed for k in AT_MEAN_SPEED}
            entry["at_mean_speed"] = {k: (ms[k] - v) / v if v else None for k, v in scaled.items()}
            entry["step_time_at_mean_speed"] = entry["at_mean_speed"]["step_time"]
        if "throughputs" in r:
            entry["engine_throughputs"] = r["throughputs"]
            entry["engine_spread"] = run_spread(r["throughputs"])
            if "throughputs" in s:  # the typical run's error: one slow run of eight moves it not at all
                e_mid, s_mid = statistics.median(r["throughputs"]), statistics.median(s["throughputs"])
                entry["median_run_throughput"] = (s_mid - e_mid) / e_mid
        spread = (profile_spreads or {}).get(run_tag(r["label"], r["concurrency"]))
        if spread is not None:
            entry["profile_spread"] = spread
        ea, sa = r.get("acceptance"), s.get("acceptance")
        if ea and sa:  # the accepted-drafts-per-step distributions
            entry["acceptance"] = {"tv_distance": histogram_distance(ea["histogram"], sa["histogram"]),
                                   "engine_mean_accepted": ea["mean_accepted"], "sim_mean_accepted": sa["mean_accepted"]}
        out.append(entry)
    return {"runs": out}


def sim_trace_doc(trace_path: Path, engine_report: dict, hardware: Path, measured: dict[str, Path],
                  matches: dict[str, float] | None = None) -> dict:
    """The trace as the simulator should see it: the engine's model, the measured device, and
    measured acceptance wherever the trace gave none (and prompt lookup's measured match rate,
    `matches`, wherever the trace gave no `match`)."""
    doc = yaml.safe_load(trace_path.read_text())
    names = {f.name for f in fields(ModelSpec)}
    doc["model"] = {k: v for k, v in engine_report["model"].items() if k in names}
    doc["hardware"] = str(hardware.resolve())
    draft = engine_report.get("engine", {}).get("draft_model")
    for entry in doc.get("speculation", []):
        label = entry.get("label", entry["scheme"])
        if entry["scheme"] == "draft" and draft:  # the draft model the engine actually ran
            entry["draft_model"] = {k: v for k, v in draft.items() if k in names}
        if entry["scheme"] != "none" and label in measured:
            entry["acceptance"] = {"measured": str(measured[label].resolve())}
            if entry["scheme"] == "ngram" and "match" not in entry and label in (matches or {}):
                entry["match"] = matches[label]
    doc.pop("engine", None)
    return doc


def compare(trace_path: Path, out: Path, hardware: Path | None = None, progress: bool = False,
            repeats: int = 1, calibrate: bool = False, warmup: int = 1, draws: int | None = None,
            cycles: int = CALIBRATION_CYCLES, engine_only: bool = False) -> dict:
    """Run the trace through the engine and the simulator and write out/comparison.json (see
    the module's docstring). Always written on the way: out/engine-pooled.json (the engine's
    runs pooled), the acceptance files and out/sim-trace.yaml. engine_only: stop there and
    return {"engine_only": ...}; `python -m validation reprice out` prices it later (on a lent
    GPU, the device's minutes go to the engine alone)."""
    from engine.cli import build as engine_build
    from engine.cli import run_trace as engine_run
    from sim.cli import run_trace as sim_run
    from sim.spec import load_trace
    from validation.calibrate import for_trace
    from validation.profile import write_profile

    from validation.timing import settled_reference

    trace = load_trace(trace_path)
    built = engine_build(trace)  # once: every run of the trace shares the model and drafters
    cal = for_trace(trace, built[0].spec) if calibrate else None
    # `cycles` of the probes per engine run of the trace, before its schemes' runs
    probe_speeds: list[tuple[float, float]] = []  # (seconds, host speed) of each call of the probes
    ticks = timed_ticks(cal.spread(len(trace.speculation) * max(1, len(trace.sweep_concurrency)), cycles),
                        probe_speeds) if cal is not None else None
    speeds: dict[str, list[tuple[float, float]]] = {}  # run tag -> [(duration, host speed)] per engine run
    measured_counts: dict[str, RequestCounts] = {}  # label -> its acceptance by request, every run's
    reports, results = [], []
    for i in range(warmup):  # untimed, unpooled: the process's first pass over the trace's shapes
        engine_run(trace, out / "engine" / f"warmup{i + 1}", progress=progress, built=built)
    for i in range(repeats):
        report, by_tag = engine_run(rotated(trace, i, repeats), out / "engine" / (f"run{i + 1}" if repeats > 1 else ""),
                                    progress=progress, between=ticks, built=built, scheme_major=True,
                                    reference=settled_reference)  # after every step, off its clock
        for tag, res in by_tag.items():
            if res.reference_speed:
                speeds.setdefault(tag, []).append((res.result.duration, res.reference_speed))
        reports.append(report)
        results.append({tag: r.result for tag, r in by_tag.items()})
        for tag, res in by_tag.items():  # acceptance per request, pooled over every run (the same prompts)
            measured_counts.setdefault(tag.rsplit("-", 1)[0], RequestCounts()).add(res)
    engine_report = pool_runs(reports, results)
    out.mkdir(parents=True, exist_ok=True)
    (out / "engine-pooled.json").write_text(json.dumps(engine_report))  # what reprice reads
    boot: list[dict] = []  # the figures of the calibration's bootstrap profiles
    if cal is not None:
        cal.complete()
        out.mkdir(parents=True, exist_ok=True)
        hardware = out / "measured-hardware.yaml"
        hardware.write_text(write_profile(cal.figures(), cal.size_mb))
        boot = cal.bootstrap(PROFILE_RESAMPLES)
        (out / "resamples").mkdir(exist_ok=True)
        for i, m in enumerate(boot):
            (out / "resamples" / f"profile{i + 1}.yaml").write_text(write_profile(m, cal.size_mb))
    hardware = hardware or ROOT / "traces" / "hardware" / "cpu-measured.yaml"
    measured = {}
    schemes = {s.label: s for s in trace.speculation}
    source = f"engine run of {trace.name}"
    for label, counts in measured_counts.items():
        doc = counts.acceptance_doc(schemes[label], source)
        if doc is not None:
            path = out / f"acceptance-{label}.json"
            path.write_text(json.dumps(doc))
            measured[label] = path
            write_counts(out / COUNTS_NAMES[0].format(label), counts, label, source)  # what reprice --refit reads
    sim_path = out / "sim-trace.yaml"
    totals = {label: counts.totals() for label, counts in measured_counts.items()}
    matches = {label: round(d / n, 4) for label, (n, d) in totals.items() if n and d}
    sim_doc = sim_trace_doc(trace_path, engine_report, hardware, measured, matches)
    sim_path.write_text(yaml.safe_dump(sim_doc, sort_keys=False))
    if engine_only:
        return {"engine_only": str(out), "hardware": str(hardware)}
    sim_report, sim_results = simulate(sim_path, out, repeats, draws, progress)
    resampled = []  # the simulator on each bootstrap profile, at one draw: the same trace on another device
    for i in range(len(boot)):
        path = out / "resamples" / f"trace{i + 1}.yaml"
        doc = {**sim_doc, "hardware": str((out / "resamples" / f"profile{i + 1}.yaml").resolve())}
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        resampled.append(sim_run(load_trace(path), out / "resamples" / f"sim{i + 1}", progress=progress, draw=0))
    comparison = errors(engine_report, sim_report, relative_speeds(speeds, probe_speeds), profile_spread(resampled))
    if boot:
        comparison["profile_noise"] = figure_noise(boot)
    by_run = run_speeds(speeds, probe_speeds)
    for entry in comparison["runs"]:
        tag = run_tag(entry["label"], entry["concurrency"])
        if tag in by_run:
            entry["engine_run_speeds"] = by_run[tag]
    engine_time = engine_pairs(speeds)
    if probe_speeds and engine_time:  # how much faster the probes saw the host than the engine's runs did
        comparison["probe_speed"] = weighted_mean(probe_speeds) / weighted_mean(engine_time) - 1
    # the step-time error by query tokens per pass (validation.by_tokens)
    comparison["step_time_by_tokens"] = ratio_by_tokens(results, sim_results)
    # the drafting-time error by kind of step, admissions apart (validation.draft_kinds)
    comparison["draft_time_by_kind"] = ratio_by_kind(results, sim_results)
    # how the decode step grows with the batch, run by run (validation.scaling)
    comparison["batch_scaling"] = batch_scaling(results, sim_results)
    (out / "comparison.json").write_text(json.dumps(comparison, indent=1) + "\n")
    plot_comparison(comparison, out / "comparison.png", trace.name)
    return comparison


def simulate(sim_path: Path, out: Path, repeats: int = 1, draws: int | None = None,
             progress: bool = False) -> tuple[dict, list[dict]]:
    """The simulator's side of a comparison: trace `sim_path` (sim_trace_doc) run at `draws`
    draws (default DRAW_GROUPS x `repeats`: its acceptance and the device's spells drawn anew
    each), pooled as the engine's `repeats` runs are, its latency percentiles read over groups of
    as many draws as engine runs (group_percentiles). Returns the pooled report and each draw's
    {run tag: RunResult}; the draws' reports go under out/sim."""
    from sim.cli import run_trace as sim_run
    from sim.spec import load_trace
    draws = draws or DRAW_GROUPS * repeats
    sim_trace, sim_reports, sim_results = load_trace(sim_path), [], []
    for i in range(draws):
        kept: dict = {}
        sim_reports.append(sim_run(sim_trace, out / "sim" / (f"draw{i + 1}" if draws > 1 else ""), progress=progress,
                                   draw=i, keep=kept))
        sim_results.append(kept)
    groups = [pool_runs(sim_reports[g:g + repeats], sim_results[g:g + repeats])
              for g in range(0, draws - repeats + 1, repeats)] if draws > repeats else []
    return group_percentiles(pool_runs(sim_reports, sim_results), groups), sim_results


def plot_comparison(comparison: dict, path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = comparison["runs"]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    width = 0.8 / max(1, len(runs))
    for i, r in enumerate(runs):
        ys = [100 * (r["errors"][m] or 0.0) for m in METRICS]
        ax.bar([j + i * width for j in range(len(METRICS))], ys, width, label=f"{r['label']} @ {r['concurrency']}")
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(METRICS))], METRICS, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("simulator error vs engine (%)")
    ax.set_title(f"Simulator against engine: {title}", fontsize=10)
    ax.legend(fontsize=7, ncol=2)
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def print_comparison(comparison: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title="signed relative error of the simulator against the engine")
    for col in ("scheme", "conc") + METRICS + ("accept TV", "engine ±", "profile ±", "median run", "host speed") + tuple(f"{SHORT[k]} @ mean speed"
                                                                                   for k in AT_MEAN_SPEED):
        t.add_column(col, justify="left" if col == "scheme" else "right")

    def pct(x):
        return "-" if x is None else f"{100 * x:+.1f}%"

    for r in comparison["runs"]:
        acc = r.get("acceptance")
        t.add_row(r["label"], str(r["concurrency"] if r["concurrency"] is not None else "open"),
                  *(pct(r["errors"][m]) for m in METRICS), f"{acc['tv_distance']:.3f}" if acc else "-",
                  "-" if r.get("engine_spread") is None else f"{100 * r['engine_spread']:.1f}%",
                  "-" if r.get("profile_spread") is None else f"{100 * r['profile_spread']:.1f}%",
                  pct(r.get("median_run_throughput")), pct(r.get("engine_speed")), *(pct(r.get("at_mean_speed", {}).get(k)) for k in AT_MEAN_SPEED))
    console = Console(width=250)
    console.print(t)
    for conc, rows in comparison.get("step_time_by_tokens", {}).items():
        if rows:
            cells = ", ".join(f"{lo}-{hi if hi is not None else ''} {r['ratio']:.3f}"
                              for r in rows for lo, hi in [r["tokens"]])
            console.print(f"concurrency {conc}: simulator over engine step time (drafting out) by query tokens a pass: {cells}")
    for tag, rows in comparison.get("draft_time_by_kind", {}).items():
        console.print(kind_line(tag, rows))
    for label, rows in comparison.get("batch_scaling", {}).items():
        cells = "; ".join(f"{r['concurrency']} over {r['base']}: engine {r['engine']:.3f}"
                          + (f" ±{100 * r['engine_se']:.1f}%" if r["engine_se"] is not None else "")
                          + f", simulator {r['sim']:.3f} ({pct(r['error'])})"
                          + (f"; drafting engine {r['drafting']['engine']:.3f}, simulator {r['drafting']['sim']:.3f}"
                             f" ({pct(r['drafting']['error'])})" if "drafting" in r else "") for r in rows)
        console.print(f"{label}: decode step by batch, run by run: {cells}")
    if comparison.get("probe_speed") is not None:
        console.print(f"host speed during the calibration's probes over during the engine's runs: "
                      f"{pct(comparison['probe_speed'])} (`host speed` and the `@ mean speed` columns are against the probes')")


SHORT = {"throughput_tok_s": "throughput", "tpot_p50": "TPOT p50", "tpot_p99": "TPOT p99", "step_time": "step"}
