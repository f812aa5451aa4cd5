"""What a factor per request would give, from a comparison's engine run at concurrency 1 (where
each step is one request's, so its accepted drafts a step can be read back from the step log):
each request's steps, tokens per step, variance a step and noise (variance / steps), the common
lambda 0.45.0 uses (sqrt((V - S) / V)) and a request's own, sqrt(T / (T + its noise)),
T = V - S. The slowest requests have the least noise, so their own factor stays nearer 1.

    python lambda_by_request.py DIR LABEL [LABEL ...]
"""
import csv
import math
import sys

import numpy as np


def main(root: str, labels: list[str]) -> None:
    for label in labels:
        reqs = list(csv.DictReader(open(f"{root}/engine/run1/runs/{label}-1-requests.csv")))
        steps = list(csv.DictReader(open(f"{root}/engine/run1/runs/{label}-1-steps.csv")))
        rows = []
        for r in reqs:
            a, b = float(r["first_token"]), float(r["finish"])
            x = np.array([int(s["accepted"]) + 1.0 for s in steps
                          if a - 1e-9 <= float(s["time"]) < b - 1e-9 and int(s["prefill_tokens"]) == 0])
            rows.append((int(r["id"]), len(x), x.mean(), x.var()))
        tau = np.array([m for _, _, m, _ in rows])
        spread, noise = tau.var(ddof=1), float(np.mean([v / n for _, n, _, v in rows]))
        true = max(0.0, spread - noise)
        print(f"{label}: V {spread:.3f}  S {noise:.3f}  common lambda {math.sqrt(true / spread):.3f}")
        for i, n, m, v in sorted(rows, key=lambda r: r[2]):
            own = math.sqrt(true / (true + v / n)) if true > 0 else 0.0
            print(f"  request {i:2d}  steps {n:2d}  tokens a step {m:.2f}  variance {v:.2f}  noise {v / n:.3f}  own lambda {own:.3f}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
