"""Drafting time by step kind in engine and simulator runs' step logs.

    python steps.py LABELS CONCURRENCY RUN_DIR...    # e.g. mtp1,draft 4 /tmp/d/fm-engine1 /tmp/d/fm-sim

Per run and label: the steps' summed drafting, and (count, total ms, mean ms) over the steps
with a prefill, the decode steps at the run's largest batch, and the decode steps below it."""
import csv
import sys

labels, conc, dirs = sys.argv[1].split(","), sys.argv[2], sys.argv[3:]
for lab in labels:
    for d in dirs:
        rows = list(csv.DictReader(open(f"{d}/runs/{lab}-{conc}-steps.csv")))
        full_batch = max(int(r["batch_size"]) for r in rows)
        pre = [r for r in rows if int(r["prefill_tokens"]) > 0]
        dec = [r for r in rows if int(r["prefill_tokens"]) == 0]
        full = [r for r in dec if int(r["batch_size"]) == full_batch]
        tail = [r for r in dec if int(r["batch_size"]) < full_batch]

        def f(rs):
            t = sum(float(r["draft_time"]) for r in rs)
            return len(rs), round(t * 1e3, 1), round(t / max(1, len(rs)) * 1e3, 2)
        total = sum(float(r["draft_time"]) for r in rows)
        print(f"{lab:6} {d:20} steps {len(rows):4} draft total {total * 1e3:7.1f} ms | prefill {f(pre)} "
              f"| full decode {f(full)} | tail {f(tail)}")
