"""report.json (DESIGN.md §5), the per-request and per-step CSVs, and the terminal table."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from sim.cost import compute_dtype
from sim.metrics import request_arrays, summarize
from sim.simulator import RunResult
from sim.spec import TraceSpec
from sim.steplog import COLUMNS

REQUEST_COLUMNS = ("id", "arrival", "first_token", "finish", "prompt_tokens", "output_tokens", "steps", "preemptions")
INT_COLUMNS = {"id", "prompt_tokens", "output_tokens", "steps", "preemptions", "batch_size", "query_tokens",
               "context_tokens", "accepted", "page_allocs", "page_frees"}


def run_tag(label: str, concurrency: int | None) -> str:
    """A run's name in file names and results: `<label>-<concurrency>`, `-open` for the trace's own arrivals."""
    return f"{label}-{concurrency if concurrency is not None else 'open'}"


def run_entry(trace: TraceSpec, scheme, concurrency: int | None, result: RunResult) -> dict:
    tag = run_tag(scheme.label, concurrency)
    entry = {
        "scheme": scheme.name, "label": scheme.label, "concurrency": concurrency, "params": scheme.params(),
        "summary": summarize(result, trace),
        "per_request": f"runs/{tag}-requests.csv", "per_step": f"runs/{tag}-steps.csv",
    }
    if result.acceptance:
        entry["acceptance"] = acceptance_entry(result.acceptance)
    return entry


def acceptance_entry(counts: dict[tuple[int, int], int]) -> dict:
    """Verified draft plans by drafts accepted, and by (drafted depth, accepted)."""
    hist: dict[int, int] = {}
    for (_, a), n in counts.items():
        hist[a] = hist.get(a, 0) + n
    total = sum(hist.values())
    return {"plans": total, "mean_accepted": sum(a * n for a, n in hist.items()) / total,
            "histogram": {str(a): hist[a] for a in sorted(hist)},
            "by_depth": {f"{d}:{a}": counts[(d, a)] for d, a in sorted(counts)}}


def fill_speedups(runs: list[dict], baseline_label: str) -> None:
    """speedup_vs_baseline: throughput over the first scheme's at the same concurrency."""
    base = {r["concurrency"]: r["summary"]["throughput_tok_s"] for r in runs if r["label"] == baseline_label}
    for r in runs:
        b = base.get(r["concurrency"])
        r["summary"]["speedup_vs_baseline"] = r["summary"]["throughput_tok_s"] / b if b else None


def build(trace: TraceSpec, runs: list[dict], producer: str = "sim") -> dict:
    hw = trace.hardware.to_dict()
    return {
        "version": 1, "trace": trace.name, "producer": producer,
        "hardware": hw, "model": trace.model.to_dict(),
        "parallel": {"tp": trace.tp}, "kv_pages": trace.num_pages,
        "knee_flop_per_byte": trace.hardware.knee(compute_dtype(trace.model)),
        "runs": runs,
    }


def write_csv(path: Path, columns: dict[str, np.ndarray], names, chunk: int = 20_000) -> None:
    """CSV with floats at full precision (repr round-trips), written in chunks of rows so memory
    stays flat however long the run."""
    n = len(columns[names[0]]) if names else 0
    with path.open("w") as fh:
        fh.write(",".join(names) + "\n")
        for lo in range(0, n, chunk):
            parts = []
            for name in names:
                col = columns[name][lo:lo + chunk]
                if name in INT_COLUMNS:
                    col = col.astype(np.int64)
                parts.append(map(str if col.dtype.kind != "f" else repr, col.tolist()))
            fh.write("\n".join(map(",".join, zip(*parts))))
            fh.write("\n")


def write_run(out: Path, entry: dict, result: RunResult) -> None:
    """One run's per-request and per-step CSVs (written as soon as the run ends)."""
    (out / "runs").mkdir(parents=True, exist_ok=True)
    write_csv(out / entry["per_request"], request_arrays(result), REQUEST_COLUMNS)
    write_csv(out / entry["per_step"], result.steps.columns(), COLUMNS)


def write(out: Path, report: dict, wall: dict | None = None) -> Path:
    """Write report.json under `out` (atomically); returns its path. Runs' CSVs: `write_run`."""
    out.mkdir(parents=True, exist_ok=True)
    doc = dict(report)
    if wall is not None:
        doc["wall_clock"] = wall  # the only field that differs between two runs of the same trace
    path = out / "report.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n")
    tmp.replace(path)
    return path
