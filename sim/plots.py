"""Sweep outputs a planner can read without the code: one CSV row per (scheme, concurrency) and
three figures - speedup against concurrency, throughput against latency, and each run's decode
roofline position against the device's knee."""
from __future__ import annotations

import csv
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

FIELDS = ("label", "scheme", "concurrency", "throughput_tok_s", "speedup_vs_baseline", "mean_accepted_tokens",
          "ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s", "e2e_p50_s", "mean_batch_size",
          "decode_arithmetic_intensity", "decode_compute_utilization", "decode_bandwidth_utilization",
          "ops_per_token", "kv_copy_bytes", "slo_attainment")


def rows(report: dict) -> list[dict]:
    out = []
    for r in report["runs"]:
        s = r["summary"]
        out.append({
            "label": r["label"], "scheme": r["scheme"], "concurrency": r["concurrency"],
            "throughput_tok_s": s["throughput_tok_s"], "speedup_vs_baseline": s["speedup_vs_baseline"],
            "mean_accepted_tokens": s["mean_accepted_tokens"],
            "ttft_p50_s": s["ttft_s"]["p50"], "ttft_p99_s": s["ttft_s"]["p99"],
            "tpot_p50_s": s["tpot_s"]["p50"], "tpot_p99_s": s["tpot_s"]["p99"], "e2e_p50_s": s["e2e_s"]["p50"],
            "mean_batch_size": s["mean_batch_size"], "decode_arithmetic_intensity": s["decode_arithmetic_intensity"],
            "decode_compute_utilization": s["decode_compute_utilization"],
            "decode_bandwidth_utilization": s["decode_bandwidth_utilization"],
            "ops_per_token": s["allocator"]["ops_per_token"], "kv_copy_bytes": s["allocator"]["kv_copy_bytes"],
            "slo_attainment": s["slo_attainment"],
        })
    return out


def write_csv(report: dict, path: Path) -> Path:
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, FIELDS)
        w.writeheader()
        w.writerows(rows(report))
    return path


def _by_label(report: dict) -> dict[str, list[dict]]:
    groups: dict[str, list[dict]] = {}
    for row in rows(report):
        if row["concurrency"] is not None:
            groups.setdefault(row["label"], []).append(row)
    return groups


def plot_all(report: dict, out: Path) -> list[Path]:
    """PNG figures for a sweep; returns their paths (none when the report has no sweep)."""
    groups = _by_label(report)
    if not groups or max(len(g) for g in groups.values()) < 2:
        return []
    out.mkdir(parents=True, exist_ok=True)
    title = f"{report['trace']}: {report['model']['name']} on {report['hardware']['name']}" \
            + (f" x{report['parallel']['tp']}" if report["parallel"]["tp"] > 1 else "")
    paths = [_speedup(groups, title, out / "speedup_vs_concurrency.png"),
             _latency(groups, title, out / "throughput_vs_latency.png"),
             _roofline(report, groups, title, out / "roofline.png")]
    return paths


def _save(fig, ax, path: Path, xlabel: str, ylabel: str, title: str, log_xy: tuple[bool, bool]) -> Path:
    """Labels, log axes, grid and legend, then the PNG."""
    if log_xy[0]:
        ax.set_xscale("log", base=2) if log_xy[0] == 2 else ax.set_xscale("log")
    if log_xy[1]:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _speedup(groups, title, path):
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for label, g in groups.items():
        ax.plot([r["concurrency"] for r in g], [r["speedup_vs_baseline"] for r in g], marker="o", label=label)
    ax.axhline(1.0, color="grey", lw=1, ls="--", label="baseline (no gain)")
    return _save(fig, ax, path, "concurrency (requests in flight)", "throughput / baseline throughput",
                 f"Speedup over the first scheme\n{title}", (2, False))


def _latency(groups, title, path):
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for label, g in groups.items():
        xs = [r["tpot_p50_s"] * 1e3 for r in g]
        ys = [r["throughput_tok_s"] for r in g]
        ax.plot(xs, ys, marker="o", label=label)
        for r, x, y in zip(g, xs, ys):
            ax.annotate(str(r["concurrency"]), (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
    return _save(fig, ax, path, "time per output token, median (ms)  [points labelled with concurrency]",
                 "throughput (output tokens/s)", f"Throughput against latency\n{title}", (True, True))


def _roofline(report, groups, title, path):
    hw = report["hardware"]
    knee = report["knee_flop_per_byte"]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for label, g in groups.items():
        pts = [(r["decode_arithmetic_intensity"], r["decode_compute_utilization"], r["concurrency"]) for r in g
               if r["decode_arithmetic_intensity"]]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] * 100 for p in pts], marker="o", label=label)
            for x, y, c in pts:
                ax.annotate(str(c), (x, y * 100), fontsize=7, xytext=(3, 3), textcoords="offset points")
    xs = [0.5, knee, knee * 20]
    ceiling = hw["eta_compute"] * 100
    ax.plot(xs, [min(ceiling, ceiling * x / knee) for x in xs], color="black", lw=1.5,
            label=f"achievable roof (knee {knee:.0f} FLOP/byte)")
    ax.axvline(knee, color="grey", ls="--", lw=1)
    return _save(fig, ax, path, "decode arithmetic intensity (FLOP per byte moved)  [points labelled with concurrency]",
                 "compute utilisation of decode steps (% of peak)", f"Roofline position of decode steps\n{title}",
                 (True, True))
