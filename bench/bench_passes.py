"""Why speculation pays little on this CPU: the cost of each pass a speculative step makes, on
the trained tiny family (engine/family), one sequence at a 200-token context.

Printed (medians over repeats): the target's decode step (1 token), chain verify of K+1 tokens,
tree verify of N nodes, the EAGLE head's root pass (1 entry) and a level pass (8 entries), the
draft model's pass (1 token), and each as a multiple of the decode step. A step of EAGLE-2 at
depth d costs about one root pass + (d-1) level passes + one tree verify; its speedup is bounded
by tokens-per-step / that multiple.

    python bench/bench_passes.py [--repeats 30] [--threads 1]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.corpus import FAMILY_DIR  # noqa: E402
from engine.drafting.heads import family_drafters  # noqa: E402
from engine.drafting.store import DraftCache, Row, pack  # noqa: E402
from engine.kv_cache import KVCache  # noqa: E402
from engine.model import SeqQuery, StepBatch  # noqa: E402
from engine.target import engine_model, load_target  # noqa: E402
from sim import trees as T  # noqa: E402
from validation.steptime import eagle_tree  # noqa: E402


def med(fn, repeats: int) -> float:
    fn()
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--context", type=int, default=200)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    target, _ = load_target()
    model = engine_model(target.state_dict(), target.config)
    dr = family_drafters(model, FAMILY_DIR)
    n = args.context
    cache = KVCache(model.spec, (n + 128) // 16 + 2, 16)
    idx = list(range(n))
    model.forward(StepBatch.pack([SeqQuery(tokens=list(range(n)), ctx=0, index=idx)]), cache)

    def verify(parents):
        t = len(parents)
        return StepBatch.pack([SeqQuery(tokens=[5], ctx=n - 1, index=idx, nodes=[1] * t, parents=parents,
                                        spec_slots=list(range(n, n + t)))]) if t else \
            StepBatch.pack([SeqQuery(tokens=[5], ctx=n - 1, index=idx)])

    rows = {}
    rows["target decode (1 token)"] = med(lambda s=verify(()): model.forward(s, cache), args.repeats)
    for k in (1, 3, 5):
        rows[f"target chain verify K={k}"] = med(lambda s=verify(T.chain(k)): model.forward(s, cache), args.repeats)
    for nodes in (16, 32, 60):
        rows[f"target tree verify {nodes} nodes"] = med(lambda s=verify(eagle_tree(nodes)): model.forward(s, cache),
                                                       args.repeats)
    head = dr.eagle
    dc = DraftCache(head.model.spec, 1, 16)
    dc.ensure(dc.scratch + n + 64)
    ix = torch.arange(n) + dc.scratch
    root, _ = pack([Row(index=ix, first=n - 1)], "cpu")
    x1 = torch.randn(1, model.spec.hidden)
    rows["EAGLE head root pass (1 entry)"] = med(lambda: head.model.forward(root, dc, inputs=x1), args.repeats)
    level, _ = pack([Row(index=ix, first=n, parents=[-1] * 8, slots=dc.spec_slots(0, 8))], "cpu")
    x8 = torch.randn(8, model.spec.hidden)
    rows["EAGLE head level pass (8 entries)"] = med(lambda: head.model.forward(level, dc, inputs=x8), args.repeats)
    draft = dr.draft
    dcache = DraftCache(draft.spec, 1, 16)
    dcache.ensure(dcache.scratch + n + 64)
    dx = torch.arange(n) + dcache.scratch
    dstep, _ = pack([Row(index=dx, first=n, parents=[-1], slots=dcache.spec_slots(0, 1))], "cpu")
    rows["draft model pass (1 token)"] = med(lambda: draft.forward(dstep, dcache), args.repeats)
    base = rows["target decode (1 token)"]
    print(f"tiny family, context {n}, {args.threads} thread(s), {args.repeats} repeats, torch {torch.__version__}")
    for k, v in rows.items():
        print(f"{k:36} {v * 1e3:7.2f} ms  {v / base:5.2f}x decode")
    return 0


if __name__ == "__main__":
    sys.exit(main())
