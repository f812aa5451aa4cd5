"""Measure every scheme's acceptance on the trained family's held-out prompts, per domain and
temperature, and write profiles the simulator reads (`acceptance: {measured: path}`):

    python -m validation.acceptance [--family tiny] [--requests 16] [--out traces/measured/tiny]

For each domain (code, text) and temperature (0, 1) the engine runs, closed loop at concurrency 4
(`--requests` held-out prompts of 128 tokens, 64 generated each):
1. the chains: ngram, draft, mtp (1 and 2 modules), eagle (depth 5), and Medusa's heads as a chain,
   whose accepted paths give per-rank acceptance (temperature 0);
2. the trees built from those ranks as the simulator builds them: Medusa's default 63-node tree,
   an EAGLE static tree of 32 nodes, and eagle2 (depth 6, top-8, 60 tokens; at temperature 0
   its confidence model takes the shape its drafter's record gives, validation/confidence.py,
   every request pooled).
Each run writes `<out>/<label>-<domain>-t<T>.json` (its profile in the simulator's form, the
histogram of accepted drafts per step, per-rank counts, the sample size) and the command prints a
table; `<out>/summary.json` collects the tokens per step and, at temperature 0, whether each
scheme emitted exactly the tokens of `none` (`--paging naive` checks the other paging mode). At temperature 1 the trees use the
temperature-0 ranks (the emitted token at a rejection is a residual sample, not the target's own
choice, so ranks are only counted at temperature 0).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import yaml

from validation.confidence import merged, run_shape
from validation.measure import (RANKS, accepted_histogram, drafted_counts, mean_tokens, per_depth_rates, profile,
                                rank_rows, vocab_of)

ROOT = Path(__file__).resolve().parents[1]
CHAINS = [
    {"scheme": "ngram", "k": 4, "ngram": 3},
    {"scheme": "draft", "k": 4},
    {"scheme": "mtp", "depth": 1, "label": "mtp1"},
    {"scheme": "mtp", "depth": 2, "label": "mtp2"},
    {"scheme": "eagle", "depth": 5},
    {"scheme": "medusa", "heads": 4, "lm_head": "shared", "tree": "chain", "label": "medusa-chain"},
]
TREE_NODES = 32


def trees(ranks: dict[str, list[list[float]]]) -> list[dict]:
    out = [{"scheme": "eagle2", "depth": 6, "topk": 8, "tree_tokens": 60}]
    if "eagle" in ranks:
        out.append({"scheme": "eagle", "depth": 5, "tree": TREE_NODES, "label": "eagle-tree",
                    "acceptance": {"rank_depth": ranks["eagle"]}})
    if "medusa-chain" in ranks:
        out.append({"scheme": "medusa", "heads": 4, "lm_head": "shared", "acceptance": {"rank_depth": ranks["medusa-chain"]}})
    return out


def trace_doc(family: str, domain: str, temperature: float, requests: int, schemes: list[dict], seed: int,
              paging: str = "indexshare") -> dict:
    return {"version": 1, "name": f"acceptance-{family}-{domain}-t{temperature:g}", "seed": seed, "hardware": "cpu",
            "model": family,
            "serving": {"max_num_seqs": 8, "max_num_batched_tokens": 1024, "page_size": 16, "kv_pages": 1024,
                        "paging": paging},
            "workload": {"requests": requests, "arrival": {"process": "closed", "concurrency": 4},
                         "prompt_tokens": {"dist": "fixed", "value": 128},
                         "output_tokens": {"dist": "fixed", "value": 64}, "temperature": temperature},
            "speculation": [{"scheme": "none"}] + schemes,
            "engine": {"checkpoint": family, "prompts": domain}}


def run(family: str, domain: str, temperature: float, requests: int, schemes: list[dict], work: Path,
        seed: int, paging: str = "indexshare") -> dict:
    from engine.cli import run_trace
    from sim.spec import load_trace

    work.mkdir(parents=True, exist_ok=True)
    path = work / f"{domain}-t{temperature:g}-{len(schemes)}.yaml"
    path.write_text(yaml.safe_dump(trace_doc(family, domain, temperature, requests, schemes, seed, paging),
                                   sort_keys=False))
    trace = load_trace(path)
    _, results = run_trace(trace, None, progress=False)
    plain = results["none-open"].tokens
    out = {}
    for scheme in trace.speculation:
        if scheme.name == "none":
            continue
        res = next(r for tag, r in results.items() if tag.rsplit("-", 1)[0] == scheme.label)
        hist = drafted_counts(res.result)
        out[scheme.label] = {"scheme": scheme, "hist": hist, "ranks": res.ranks, "same_as_none": res.tokens == plain,
                             "confidence": merged(res.confidence.values())}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m validation.acceptance", description=__doc__.split("\n\n")[0])
    ap.add_argument("--family", default="tiny")
    ap.add_argument("--requests", type=int, default=16)
    ap.add_argument("--domains", default="code,text")
    ap.add_argument("--temperatures", default="0,1")
    ap.add_argument("--seed", type=int, default=29)
    ap.add_argument("--paging", choices=("indexshare", "naive"), default="indexshare")
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    ap.add_argument("--out", type=Path, default=None, help="default: traces/measured/<family>")
    args = ap.parse_args(argv)
    if args.threads:
        import torch
        torch.set_num_threads(args.threads)
    out = args.out or ROOT / "traces" / "measured" / args.family
    out.mkdir(parents=True, exist_ok=True)
    work = out / ".work"
    summary: dict = {}
    t0 = time.time()
    print(f"{'label':14} {'domain':6} {'T':>3} {'tok/step':>9} {'steps':>6} {'=none':>5}  per-depth acceptance",
          flush=True)
    for domain in args.domains.split(","):
        zero_ranks: dict[str, list[list[float]]] = {}
        for temp in (float(t) for t in args.temperatures.split(",")):
            first = run(args.family, domain, temp, args.requests, CHAINS, work, args.seed, args.paging)
            if temp == 0:
                zero_ranks = {k: rank_rows(v["ranks"], RANKS) for k, v in first.items() if v["ranks"]}
            second = run(args.family, domain, temp, args.requests, trees(zero_ranks), work, args.seed, args.paging)
            for label, m in {**first, **second}.items():
                hist, scheme = m["hist"], m["scheme"]
                tau = mean_tokens(hist)
                rates, samples = per_depth_rates(hist)
                log = m["confidence"]  # EAGLE-2's drafter at temperature 0: the measured shape
                shape = run_shape(log, scheme.topk, vocab_of(scheme)) if log.top1[0] else None
                doc = {**profile(scheme, hist, m["ranks"], None, shape), "source": f"engine, family {args.family}, "
                       f"{args.requests} held-out {domain} prompts, temperature {temp:g}",
                       "scheme": scheme.name, "domain": domain, "temperature": temp, "samples": samples,
                       "histogram": {str(k): v for k, v in accepted_histogram(hist).items()},
                       "per_rank_counts": {f"{d}:{r}": n for (d, r), n in sorted(m["ranks"].items())}}
                (out / f"{label}-{domain}-t{temp:g}.json").write_text(json.dumps(doc, indent=1) + "\n")
                same = m["same_as_none"] if temp == 0 else None  # sampled runs differ by design
                summary.setdefault(label, {}).setdefault(domain, {})[f"t{temp:g}"] = {
                    "tokens_per_step": round(tau, 4), "steps": samples, "per_depth": [round(r, 4) for r in rates],
                    **({"tokens_equal_none": same} if same is not None else {})}
                print(f"{label:14} {domain:6} {temp:>3g} {tau:9.3f} {samples:6d} {'-' if same is None else str(same):>5}  "
                      + " ".join(f"{r:.2f}" for r in rates), flush=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(f"wrote {out} ({time.time() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
