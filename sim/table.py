"""The terminal table a planner reads first."""
from __future__ import annotations

from rich.console import Console
from rich.table import Table

HEADERS = ("scheme", "conc", "tok/s", "speedup", "TTFT p50/p99 ms", "TPOT p50/p99 ms", "tok/step", "batch",
           "decode compute/BW", "pool ops/tok", "KV copy MB", "preempt", "SLO")


def _ms(x) -> str:
    return "-" if x is None else f"{x * 1e3:.1f}"


def print_table(report: dict, console: Console | None = None) -> None:
    console = console or Console()
    if console.width < 150:  # the table is wide; let a narrow terminal wrap lines instead of eliding cells
        console = Console(width=150, file=console.file)
    t = Table(title=f"{report['trace']} ({report['producer']}): {report['hardware']['name']}, "
                    f"{report['model']['name']}, tp {report['parallel']['tp']}")
    for col in HEADERS:
        t.add_column(col, justify="left" if col == "scheme" else "right")
    for r in report["runs"]:
        s = r["summary"]
        a = s["allocator"]
        sp = s["speedup_vs_baseline"]
        t.add_row(
            r["label"], str(r["concurrency"] if r["concurrency"] is not None else "open"),
            f"{s['throughput_tok_s']:.1f}", "-" if sp is None else f"{sp:.2f}x",
            f"{_ms(s['ttft_s']['p50'])}/{_ms(s['ttft_s']['p99'])}",
            f"{_ms(s['tpot_s']['p50'])}/{_ms(s['tpot_s']['p99'])}",
            f"{s['mean_accepted_tokens']:.2f}", f"{s['mean_batch_size']:.1f}",
            f"{s['decode_compute_utilization'] * 100:.2f}%/{s['decode_bandwidth_utilization'] * 100:.0f}%",
            f"{a['ops_per_token']:.3f}", f"{a['kv_copy_bytes'] / 1e6:.1f}", str(a["preemptions"]),
            f"{s['slo_attainment'] * 100:.0f}%",
        )
    console.print(t)
