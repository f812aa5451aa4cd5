"""Step-time validation (DESIGN.md §8.2): the engine's forward pass, timed over a grid of batch
size x context x query tokens on random-weight models of real shapes, against the simulator's
prediction of each point from a measured hardware profile alone.

    python -m validation steptime --out DIR [--hardware PROFILE] [--fit] [--quick] [--rounds R]
                                  [--repeats N] [--sample-ms MS]

Grid (per model): decode (1 query token), chain verify K = 1..6 (K+1 tokens), tree verify of 16,
32 and 63 nodes (an EAGLE-like tree: top-4 at depth 1, then each level expanding its first
nodes), mixed passes (since 0.47.0: half the sequences verify a chain of MIXED_DEPTH, the rest
decode, as prompt lookup's passes do when some sequences found no match; Work.mixed), and
prefill chunks, at several batch sizes and contexts. A point's work is what the simulator's
scheduler gives the same batch (sim.scheduler.Batch.work). The grid is timed in `rounds`
passes (alternately forwards and backwards). In each pass a point's `Model.forward` calls (after
one warm-up call) run for at least `repeats` calls and `sample_s` seconds (one call of a 7.7 ms
point varies by 35-41% on this host, a mean of 20 calls by 19-26%): its pass's sample is their
mean. A point's `measured` time is the mean of its passes' samples and `noise` their relative
standard error (0 from one pass); each pass's sample is kept (`samples`). (Normalising each
sample by a reference timed beside it, call by call, was tried and not kept: a model's decode
forward or a small matmul loop as the reference reads 1.22-1.25x slower right after a point that
swept the caches, and a pure-Python loop, which does not, tracks the forward too loosely: over
three grids the normalised errors read 6.9%, 6.0% and 9.4% median against 7.6%, 6.1% and 6.7%
for the plain means.)
Unless `--hardware` names a profile, validation.calibrate's probes run one (or a few) at a
time between consecutive points, CAL_CYCLES cycles of them per pass, and the points are predicted
from the profile they measure (written to DIR/measured-hardware.yaml): a profile measured at
other moments than the points mispredicts them all alike (calibrations an hour apart read 0.5
and 1.1 ms per layer).
Against that, the simulator's `ForwardCost(model, hardware)(work).time + pass_overhead_s +
index_check_s` (the forward alone, as timed, with the target's index checks) for the same work
(query tokens, attended pairs, KV read, logits rows: the scheduler's `Batch.aggregates`), the
hardware as it serves that model alone (`HardwareSpec.for_weights`: the warm matmul and gather
curves where its weights fit the last-level cache, as the family's do and the Llama shape's not).

`--fit` tunes eta_compute, eta_memory, eta_kv, eta_attn, launch_us, pass_overhead_us,
multi_query_us, batch_query_us, mixed_query_us, elementwise_ns (the measured kv_sizes, kv_sizes_warm or
elementwise_sizes curves scaled with their figure) and (without measured gemm_rows curves) gemm_half_rows on the even-numbered points (coordinate descent
on the median absolute log error) and reports the error on the odd ones.
Writes DIR/steptime.json (every point, the error distribution, the fit), DIR/steptime.png and,
with --fit, DIR/fitted-hardware.yaml (the profile with the fitted fields, for `compare --hardware`).
"""
from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import json  # noqa: E402
import math  # noqa: E402
import statistics  # noqa: E402
from dataclasses import replace  # noqa: E402
from pathlib import Path  # noqa: E402

import torch  # noqa: E402

from sim import trees as T  # noqa: E402
from sim.cost import ForwardCost, Work  # noqa: E402
from sim.hardware import hardware_from_node  # noqa: E402
from sim.models import model_from_node  # noqa: E402
from sim.scheduler import Batch  # noqa: E402
from sim.specio import Node  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
# model shapes (a preset cut and scaled so a point takes well under a second on a 2-core CPU)
MODELS = {
    "cpu": [("llama-3.2-1b", {"layers": 2, "vocab": 32768}), ("tiny", {})],
    "gpu": [("llama-3.1-8b", {"layers": 4}), ("tiny", {})],
}
MIXED_DEPTH = 4  # the chain the mixed points' drafting half verifies (prompt lookup's k in the family's traces)


def eagle_tree(nodes: int) -> tuple[int, ...]:
    """top-4 children of the root, then 4 children under each of the first nodes of every level."""
    parents: list[int] = [-1] * min(4, nodes)
    level = list(range(len(parents)))
    while len(parents) < nodes:
        nxt = []
        for p in level:
            for _ in range(4 if p == level[0] else 2):
                if len(parents) < nodes:
                    nxt.append(len(parents))
                    parents.append(p)
        level = nxt
    return tuple(parents)


def grid(quick: bool) -> list[dict]:
    """Points: kind, batch, context, query tokens per sequence (q), drafted tree (parents) and
    how many of the batch's sequences verify it (`drafting`; the rest decode one token)."""
    pts = []
    batches, contexts = ((1, 4), (128, 1024)) if quick else ((1, 4, 16), (128, 512, 2048))
    for B in batches:
        for ctx in contexts:
            pts.append({"kind": "decode", "batch": B, "context": ctx, "q": 1, "tree": (), "drafting": 0})
            for K in ((2, 5) if quick else range(1, 7)):
                pts.append({"kind": f"chain{K}", "batch": B, "context": ctx, "q": 1, "tree": T.chain(K), "drafting": B})
            for n in ((16,) if quick else (16, 32, 63)):
                if B * n <= 512:
                    pts.append({"kind": f"tree{n}", "batch": B, "context": ctx, "q": 1, "tree": eagle_tree(n),
                                "drafting": B})
            if B > 1:  # half verify a chain, half decode: prompt lookup's passes (some sequences found no match)
                pts.append({"kind": f"mixed{MIXED_DEPTH}", "batch": B, "context": ctx, "q": 1,
                            "tree": T.chain(MIXED_DEPTH), "drafting": B // 2})
    for chunk in ((128,) if quick else (64, 256, 512)):
        pts.append({"kind": f"prefill{chunk}", "batch": 1, "context": 0, "q": chunk, "tree": (), "drafting": 0})
        pts.append({"kind": f"prefill{chunk}", "batch": 1, "context": 512, "q": chunk, "tree": (), "drafting": 0})
    return pts


def layout(p: dict) -> list[tuple]:
    """Each sequence's drafted tree: the first `drafting` verify the point's tree, the rest none
    (a point without `drafting`, as grids before 0.47.0 wrote them: every sequence verifies)."""
    drafting = p.get("drafting", p["batch"])
    return [tuple(p["tree"]) if b < drafting else () for b in range(p["batch"])]


def work_of(p: dict) -> Work:
    """The point's batch as the simulator's scheduler prices it (sim.scheduler.Batch.work): every
    sequence samples (logits for the last query token and every node)."""
    B = p["batch"]
    return Batch(seqs=[None] * B, query=[p["q"]] * B, trees=layout(p), plans=[None] * B, samples=[True] * B,
                 decode=[True] * B, context=[p["context"]] * B).work()


def point_call(model, p: dict, device: str):
    """The call that runs point p's batch through `model.forward` (its KV cache and batch built once)."""
    from engine.kv_cache import KVCache
    from engine.model import SeqQuery, StepBatch
    B, ctx, q = p["batch"], p["context"], p["q"]
    per = ctx + q + len(p["tree"])
    cache = KVCache(model.spec, -(-(B * per) // 16) + 1, 16, device, model.dtype)
    g = torch.Generator().manual_seed(0)
    seqs = []
    for b, tree in enumerate(layout(p)):
        base = b * per
        toks = torch.randint(0, model.spec.vocab, (q + len(tree),), generator=g).tolist()
        seqs.append(SeqQuery(tokens=toks[:q], ctx=ctx, index=list(range(base, base + ctx + q)), nodes=toks[q:],
                             parents=tree, spec_slots=list(range(base + ctx + q, base + ctx + q + len(tree)))))
    step = StepBatch.pack(seqs, device)
    return lambda: model.forward(step, cache)


def measured(samples: list[float]) -> dict:
    """A point's time from its passes' samples: `measured` (their mean) and `noise` (the relative
    standard error of that mean; 0 from one pass)."""
    n = len(samples)
    mean = statistics.mean(samples)
    return {"measured": mean, "noise": statistics.stdev(samples) / mean / math.sqrt(n) if n > 1 else 0.0}


def grid_specs(device: str, width: float) -> list[tuple]:
    """[(the points' model name, MODELS' changes, ModelSpec)] of the grid's models on `device`
    ("cpu", or any other for the GPU's), weights and KV at `width` bytes (the engine's dtype)."""
    out = []
    for name, changes in MODELS["cpu" if device == "cpu" else "gpu"]:
        spec = replace(model_from_node(Node(name, "steptime", "model"), ROOT), **changes,
                       bytes_per_weight=width, bytes_per_kv=width)
        out.append((f"{spec.name}-scaled" if changes else spec.name, changes, spec))
    return out


def by_model(points: list[dict], times: list[float]) -> dict[str, list[float]]:
    """{"all": errors, model: its points' errors} of `times` against the points' measured."""
    errs: dict = {"all": []}
    for p, t in zip(points, times):
        errs["all"].append(t / p["measured"] - 1)
        errs.setdefault(p["model"], []).append(errs["all"][-1])
    return errs


def summary_text(errs: list[float]) -> str:
    """"median% / p90% (signed median%)" of |errs|."""
    e = summary(errs)
    return f"{100 * e['median_abs']:.1f}% / {100 * e['p90_abs']:.1f}% ({100 * e['median_signed']:+.1f}%)"


def reprice_groups(grid_dir: Path, ways: dict[str, dict], group_of) -> tuple[list[str], dict]:
    """`reprice` summed up: each way's line of errors by model (summary_text), and {group: {way:
    [signed errors]}} of the points `group_of(point)` puts in a group (None: in none)."""
    points, priced = reprice(grid_dir, ways)
    lines, groups = [], {}
    for way, times in priced.items():
        for p, t in zip(points, times):
            key = group_of(p)
            if key is not None:
                groups.setdefault(key, {}).setdefault(way, []).append(t / p["measured"] - 1)
        lines.append(f"{grid_dir.name} {way:18}: "
                     + "; ".join(f"{k} {summary_text(v)}" for k, v in by_model(points, times).items()))
    return lines, groups


def reprice(grid_dir: Path, ways: dict[str, dict]) -> tuple[list[dict], dict[str, list[float]]]:
    """A CPU grid's points (the DIR of `steptime --out DIR`: steptime.json) and their prices
    under its measured profile changed each way ({way: HardwareSpec fields to replace}; {} as
    run): (points, {way: [seconds per point]})."""
    specs = {name: spec for name, _, spec in grid_specs("cpu", 4.0)}
    hw = hardware_from_node(Node(str(grid_dir / "measured-hardware.yaml"), "profile", "hardware"), ROOT)
    points = [p | {"tree": tuple(p["tree"])} for p in json.loads((grid_dir / "steptime.json").read_text())["points"]]
    return points, {way: [predict(specs[p["model"]], replace(hw, **changes), p) for p in points]
                    for way, changes in ways.items()}


def predict(spec, hw, p: dict) -> float:
    """The forward pass alone, as timed: its layers and LM head plus one pass's host time (the
    engine's step adds scheduling, verification and commit: host_time, which the end-to-end
    comparison checks)."""
    return bare_forward(spec, hw, work_of(p))


def bare_forward(spec, hw, work: Work) -> float:
    """The simulator's price of a bare forward call of `spec` over `work` under `hw` (not yet
    for_weights): nothing samples or verifies its logits, the model is served alone, its products
    on the warm matmul curves where its weights fit the last-level cache."""
    bare = replace(hw.for_weights(spec.weight_bytes), logit_s=0.0)
    return float(ForwardCost(spec, bare)(work).time + hw.pass_overhead_s + hw.index_check_s)


def summary(errs: list[float]) -> dict:
    a = sorted(abs(e) for e in errs)
    if not a:
        return {}
    return {"points": len(a), "median_abs": a[len(a) // 2], "p90_abs": a[min(len(a) - 1, int(0.9 * len(a)))],
            "max_abs": a[-1], "median_signed": statistics.median(errs)}


FIT = ("eta_compute", "eta_memory", "eta_kv", "eta_attn", "launch_s", "gemm_half_rows", "pass_overhead_s",
       "multi_query_s", "batch_query_s", "mixed_query_s", "elementwise_s")
# fitted figure -> the measured curves it scales
CURVES = {"eta_kv": ("kv_sizes", "kv_sizes_warm", "kv_decode", "kv_decode_warm"), "elementwise_s": ("elementwise_sizes",)}
SAMPLE_S = 0.06  # a point's calls per pass run for at least this long
CAL_CYCLES = 2  # calibration cycles per pass, one probe or a few between consecutive points
SCALES = (0.25, 0.4, 0.55, 0.7, 0.8, 0.9, 1.0, 1.1, 1.25, 1.4, 1.7, 2.0, 2.5, 3.0, 4.0)


def scaled(curve: tuple, factor: float, cap: float) -> tuple:
    """A measured curve ((size, value), ...), or curves by key ((key, curve), ...: kv_decode),
    with every value times `factor`, at most `cap`."""
    if curve and isinstance(curve[0][1], tuple):
        return tuple((key, scaled(c, factor, cap)) for key, c in curve)
    return tuple((n, min(cap, x * factor)) for n, x in curve)


def fit(points: list[dict], hw) -> tuple[dict, object]:
    """Coordinate descent over FIT (each scaled by SCALES in turn, efficiencies capped at 1;
    gemm_half_rows only where no measured gemm_rows curves replace it), minimising the median
    |log(predicted / measured)| over `points`."""
    names = [n for n in FIT if not (n == "gemm_half_rows" and hw.gemm_rows)]

    def loss(h):
        return statistics.median(abs(math.log(predict(p["spec"], h, p) / p["measured"])) for p in points)

    best, cur = loss(hw), hw
    for _ in range(4):
        for name in names:
            base = getattr(cur, name) or (8.0 if name == "gemm_half_rows" else 0.0)
            for s in SCALES:
                v = base * s
                if name.startswith("eta_"):
                    v = min(1.0, v)
                change = {name: v}
                cap = 1.0 if name.startswith("eta_") else math.inf
                for curve in CURVES.get(name, ()) if base else ():  # a measured curve that replaces it scales with it
                    change[curve] = scaled(getattr(cur, curve), v / base, cap)
                cand = replace(cur, **change)
                e = loss(cand)
                if e < best - 1e-9:
                    best, cur = e, cand
    params = {}
    for k in names:  # in the profile's units
        if k.endswith("_s"):
            unit, scale = ("_ns", 1e9) if k == "elementwise_s" else ("_us", 1e6)
            params[k[:-2] + unit] = round(getattr(cur, k) * scale, 3)
        else:
            params[k] = round(getattr(cur, k), 9)
    return params, cur


def run(out: Path, hardware: Path | None = None, do_fit: bool = False, quick: bool = False, repeats: int = 1,
        progress=print, rounds: int = 6, size_mb: int = 512, sample_s: float = SAMPLE_S) -> dict:
    from engine.checkpoint import engine_dtype
    from engine.model import Model
    from kernels.backend import default_backend
    from sim.cost import attention_geometry, model_shapes
    from validation.calibrate import DEFAULT_CONTEXT, Calibration, context_model
    from validation.profile import write_profile
    from validation.timing import mean_time
    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = engine_dtype(device)  # the engine's width and kernels here (on a GPU bf16 and Triton)
    width = float(dtype.itemsize)
    # on a CPU the probes' host work amid the family's memory traffic (validation.traffic): its
    # forwards are the grid's most host-bound
    # (and the matmul curves of the grid's own matrices: sim.cost.model_shapes)
    specs = grid_specs(device, width)
    cal = None if hardware else Calibration(size_mb, device=device, context=context_model(DEFAULT_CONTEXT),
                                            models=[(spec.weight_bytes, model_shapes(spec)) for *_, spec in specs],
                                            geometries=[attention_geometry(spec) for *_, spec in specs])
    out.mkdir(parents=True, exist_ok=True)
    models, points = [], []
    for name, _, spec in specs:
        models.append(Model.random(spec, seed=0, device=device, dtype=dtype, backend=default_backend(device)))
        for p in grid(quick):
            points.append({**p, "model": name, "spec": spec, "net": len(models) - 1, "samples": []})
    between = cal.spread(len(points), CAL_CYCLES) if cal is not None else (lambda: None)
    for r in range(rounds):
        for p in (points if r % 2 == 0 else points[::-1]):  # each point's passes spread over the run
            between()
            p["samples"].append(mean_time(point_call(models[p["net"]], p, device), device, repeats, min_s=sample_s))
        progress(f"pass {r + 1}/{rounds} timed ({len(points)} points)")
    del models
    hw_path = hardware
    if cal is not None:
        cal.complete()
        hw_path = out / "measured-hardware.yaml"
        hw_path.write_text(write_profile(cal.figures(), cal.size_mb))
    hw = hardware_from_node(Node(str(hw_path), str(hw_path), "hardware"), ROOT)
    for p in points:
        p.update(measured(p["samples"]))
        p["predicted"] = predict(p["spec"], hw, p)
        p["error"] = (p["predicted"] - p["measured"]) / p["measured"]
        progress(f"{p['model']:22} {p['kind']:10} B={p['batch']:<3} ctx={p['context']:<5} "
                 f"measured {p['measured'] * 1e3:8.2f} ms +-{p['noise']:5.1%}  "
                 f"predicted {p['predicted'] * 1e3:8.2f} ms  {p['error']:+.1%}")
    result = {"hardware": str(hw_path), "device": device, "repeats": repeats, "rounds": rounds,
              "sample_s": sample_s,
              "errors": summary([p["error"] for p in points]),
              "noise_median": statistics.median(p["noise"] for p in points),
              "by_kind": {}, "points": []}
    kinds = sorted({p["kind"].rstrip("0123456789") for p in points})
    for k in kinds:
        result["by_kind"][k] = summary([p["error"] for p in points if p["kind"].rstrip("0123456789") == k])
    if do_fit:
        train, test = points[0::2], points[1::2]
        params, h = fit(train, hw)
        errs = [(predict(p["spec"], h, p) - p["measured"]) / p["measured"] for p in test]
        result["fit"] = {"params": params, "train_points": len(train), "test": summary(errs)}
        import yaml
        fitted = {**h.to_profile(), "description": f"{h.description}, fitted on half the step-time grid"}
        (out / "fitted-hardware.yaml").write_text(
            f"# {hw_path} with {', '.join(params)} fitted by `python -m validation steptime --fit`\n"
            + yaml.safe_dump(fitted, sort_keys=False))
    for p in points:
        result["points"].append({k: (list(v) if k == "tree" else v) for k, v in p.items() if k not in ("spec", "net")})
    (out / "steptime.json").write_text(json.dumps(result, indent=1) + "\n")
    _plot(points, out / "steptime.png")
    return result


def _plot(points: list[dict], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(5.5, 5))
    for kind, marker in (("decode", "o"), ("chain", "s"), ("tree", "^"), ("mixed", "v"), ("prefill", "D")):
        sel = [p for p in points if p["kind"].startswith(kind)]
        if sel:
            ax.scatter([p["measured"] * 1e3 for p in sel], [p["predicted"] * 1e3 for p in sel], label=kind,
                       marker=marker, s=18)
    lo = min(min(p["measured"], p["predicted"]) for p in points) * 1e3 * 0.8
    hi = max(max(p["measured"], p["predicted"]) for p in points) * 1e3 * 1.25
    ax.plot([lo, hi], [lo, hi], "k--", lw=0.8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("measured step (ms)")
    ax.set_ylabel("predicted step (ms)")
    ax.set_title("step time: simulator vs engine")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
