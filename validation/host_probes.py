"""The calibration's host-time microbenchmarks (validation/calibrate.py says what each one
measures and which profile field it gives): logits and the drafters' selection, EAGLE-2's tree
bookkeeping, verification's host time, bare forwards of small models, engine steps, drafter
passes, the allocator, and the speed probe's windows. Each builder sets up its model once and
returns the call to time (validation.calibrate.Calibration runs them round-robin)."""
from __future__ import annotations

import statistics
import time
from pathlib import Path

import numpy as np
import torch

from kernels.backend import default_backend
from sim import trees as T
from sim.cost import KERNELS_PER_LAYER, LM_HEAD_KERNELS, ForwardCost
from sim.models import ModelSpec
from validation.probes import EW_SPEC, extra_per_unit
from validation.timing import device_sync


LOGIT_SEQS, LOGIT_NODES, LOGIT_VOCABS = 4, 31, (1024, 8192)


def logit_probe(device: str, vocab: int):
    """The engine's greedy verification of one group of LOGIT_SEQS sequences, each a binary tree
    of LOGIT_NODES drafted nodes, over a vocabulary of `vocab` (fp32 logits): the rows stacked
    out of the forward's logits, then engine.verify.verify_tree_greedy, as the runner does. The
    difference between LOGIT_VOCABS' two vocabularies over the extra logit elements ->
    `logit_ns` (the tree walk's fixed cost cancels)."""
    from engine.runner import group_rows
    from engine.verify import verify_tree_greedy
    rows = LOGIT_NODES + 1
    logits = torch.randn(LOGIT_SEQS * rows, vocab, device=device)                     # (B (T+1), V)
    drafts = torch.randint(0, vocab, (LOGIT_SEQS, LOGIT_NODES), device=device)         # (B, T)
    parents = [(i - 1) // 2 for i in range(LOGIT_NODES)]

    starts = [b * rows for b in range(LOGIT_SEQS)]

    def run():
        group = group_rows(logits, starts, rows)  # (B, T+1, V)
        return verify_tree_greedy(group, drafts, parents)
    return run


def logit_time(t_small: float, t_large: float) -> float:
    """Seconds per logit element from logit_probe at LOGIT_VOCABS' two sizes (0 if not slower)."""
    small, large = LOGIT_VOCABS
    return extra_per_unit(t_small, t_large, LOGIT_SEQS * (LOGIT_NODES + 1) * (large - small))


DRAFT_LOGIT_ROWS = 32  # LM-head rows of the drafter-selection probe (EAGLE-2 at top-8, 4 sequences: one pass)


def draft_logit_probe(device: str, vocab: int):
    """What the engine's drafters do with their LM-head rows, as EAGLE-2's (engine/drafting/eagle.py
    `children`) does over one pass of DRAFT_LOGIT_ROWS rows of `vocab` fp32 logits: the softmax, the
    top candidates (drafting.base.RANKS), their ids and probabilities back as lists. At
    LOGIT_VOCABS' two sizes the extra time per extra element -> `draft_logit_ns` (a softmax and a
    top-k read each element more slowly than verification's argmax: 4.5-5.2 against 2.5-2.9 ns
    here)."""
    from engine.drafting.base import RANKS
    logits = torch.randn(DRAFT_LOGIT_ROWS, vocab, device=device)  # (P, V)

    def run():
        top = torch.softmax(logits, -1).topk(RANKS)
        return top.indices.tolist(), top.values.tolist()
    return run


def draft_logit_time(t_small: float, t_large: float) -> float:
    """Seconds per logit element from draft_logit_probe at LOGIT_VOCABS' two sizes (0 if not slower)."""
    small, large = LOGIT_VOCABS
    return extra_per_unit(t_small, t_large, DRAFT_LOGIT_ROWS * (large - small))


DRAFT_TREE_SEQS, DRAFT_TREE_DEPTH, DRAFT_TREE_TOPK = 4, 6, (2, 8)  # the tree-bookkeeping probe's shape


def draft_tree_candidates(k: int, depth: int) -> int:
    """Candidates an EAGLE-2 drafter scores for one sequence: the root's top-k, then k x k at each
    further depth (the k most confident frontier nodes' top-k children)."""
    return k + (depth - 1) * k * k


def draft_tree_probe(device: str, k: int):
    """EAGLE-2's tree bookkeeping as the engine runs it (engine.drafting.eagle.grow_dynamic: the
    children's softmax and top-k, each candidate recorded, the frontier and the kept tree chosen by
    confidence) for DRAFT_TREE_SEQS sequences at depth DRAFT_TREE_DEPTH and top-`k`, over a
    64-token vocabulary, its `expand` storing random logits for the expanded nodes instead of
    running the head. At DRAFT_TREE_TOPK's two k the extra time per extra candidate ->
    `draft_cand_us` (`draft_cand_time`)."""
    from engine.drafting.eagle import Grow, grow_dynamic
    rows = torch.randn(1 + k, VERIFY_VOCAB, device=device)  # (1 + k, V) the root's, then the expanded nodes'
    feat = torch.zeros(8, device=device)
    keep = draft_tree_candidates(k, DRAFT_TREE_DEPTH) // 2

    def run():
        grows = [Grow(feat, rows[0]) for _ in range(DRAFT_TREE_SEQS)]

        def expand(todo: dict) -> None:
            for b, nodes in todo.items():
                for i, nid in enumerate(nodes):
                    grows[b].feat[nid], grows[b].logits[nid] = feat, rows[1 + i]
        return grow_dynamic(grows, [DRAFT_TREE_DEPTH] * DRAFT_TREE_SEQS, k, keep, expand)
    return run


def draft_cand_time(t_small: float, t_large: float) -> float:
    """Seconds per candidate from draft_tree_probe at DRAFT_TREE_TOPK's two k (0 if not slower)."""
    small, large = (draft_tree_candidates(k, DRAFT_TREE_DEPTH) for k in DRAFT_TREE_TOPK)
    return extra_per_unit(t_small, t_large, DRAFT_TREE_SEQS * (large - small))


VERIFY_SEQS = 4  # sequences of the verify host-time probe
VERIFY_VOCAB = 64  # the verification host probe's vocabulary: its logits cost next to nothing
VERIFY_TREES = (8, 62)  # nodes of its two trees (the extra nodes' time -> tree_node_us)


def _binary_tree(n: int) -> tuple[int, ...]:
    return tuple((i - 1) // 2 for i in range(n))


def verify_host_probe(device: str) -> dict:
    """Callables that time the engine's host work around a pass beyond the logits, as the
    runner (engine/runner.py `_forward_verify`) does it at temperature 0:
    - `vchain`: one verification call, one sequence's 1-node chain (its rows out of the logits,
      the drafts as a tensor, engine.verify's chain routine, the results back as lists);
    - `vtree8`, `vtree62` (VERIFY_TREES): the same call for one sequence's binary tree of 8 and
      62 nodes (the tree routine, which walks the tree's ancestor table);
    - `pack0`, `pack62`: engine.model.StepBatch.pack of VERIFY_SEQS sequences decoding, and each
      with a 62-node tree (query, slot and tree-mask rows).
    Their differences -> verify_call_us, tree_call_us, tree_node_us, pack_node_us (calibrate)."""
    from engine.model import SeqQuery, StepBatch
    from engine.runner import group_rows
    from engine.verify import verify_chain_greedy, verify_tree_greedy

    def call(parents: tuple):
        t = len(parents)
        logits = torch.randn(t + 1, VERIFY_VOCAB, device=device)  # (T+1, V)
        drafts = [list(range(t))]

        def run():
            rows = group_rows(logits, [0], t + 1)  # (1, T+1, V)
            d = torch.tensor(drafts, dtype=torch.int64, device=device).view(1, t)
            if T.is_chain(parents):
                toks, num = verify_chain_greedy(rows, d)
                path = None
            else:
                toks, num, path = verify_tree_greedy(rows, d, list(parents))
            toks.tolist(), num.tolist(), path.tolist() if path is not None else None
        return run

    def pack(nodes: int):
        ctx, tree = 160, _binary_tree(nodes)
        seqs = [SeqQuery(tokens=[1], ctx=ctx, index=torch.arange(b * 400, b * 400 + ctx + 1), nodes=[2] * nodes,
                         parents=tree, spec_slots=list(range(b * 400 + ctx + 1, b * 400 + ctx + 1 + nodes)))
                for b in range(VERIFY_SEQS)]
        return lambda: StepBatch.pack(seqs, device)
    small, large = VERIFY_TREES
    return {"vchain": call((-1,)), f"vtree{small}": call(_binary_tree(small)), f"vtree{large}": call(_binary_tree(large)),
            "pack0": pack(0), f"pack{large}": pack(large)}


def verify_host_figures(t: dict, logit_s: float) -> dict:
    """verify_call_s, tree_call_s, tree_node_s, pack_node_s from verify_host_probe's mean times
    (its calls' few logits, at `logit_s` per element, taken off)."""
    small, large = VERIFY_TREES
    call = {k: t[k] - logit_s * n * VERIFY_VOCAB for k, n in (("vchain", 2), (f"vtree{small}", small + 1),
                                                               (f"vtree{large}", large + 1))}
    node = extra_per_unit(call[f"vtree{small}"], call[f"vtree{large}"], large - small)
    return {"verify_call_s": max(0.0, call["vchain"]), "tree_node_s": node,
            "tree_call_s": max(0.0, call[f"vtree{small}"] - small * node - call["vchain"]),
            "pack_node_s": extra_per_unit(t["pack0"], t[f"pack{large}"], VERIFY_SEQS * large)}


HOST_SPEC = ModelSpec(name="probe", layers=1, hidden=64, heads=4, kv_heads=2, head_dim=16, ffn=128,
                      vocab=256, bytes_per_weight=4, bytes_per_kv=4)  # the host-time probes' model


def forward_probe(layers: int, device: str, nodes: int = 0, seqs: int = 1, check: bool = True, plain: int = 0,
                  shape: ModelSpec = HOST_SPEC, ctx: int = 8):
    """A bare forward call of a random model of `shape` (HOST_SPEC, hidden 64, by default) with
    `layers` layers, `seqs` sequences each with one decode token (and a chain of `nodes` drafted
    tokens to verify, but for the last `plain` of them) over `ctx` keys (8: at HOST_SPEC's size
    compute and bandwidth are then negligible, so its time is host time). check: the model checks
    the step's index tensors, as the engine's target does (its drafters do not)."""
    from dataclasses import replace

    from engine.checkpoint import engine_dtype
    from engine.kv_cache import KVCache
    from engine.model import Model, SeqQuery, StepBatch
    # the engine's kernels and width on this device, as engine.checkpoint.resolve chooses them (on
    # a GPU Triton and bfloat16: with the torch reference's attention a layer read 1.14 ms there)
    dtype = engine_dtype(device)
    model = Model.random(replace(shape, layers=layers), seed=0, device=device, check_values=check,
                         dtype=dtype, backend=default_backend(device))
    pages = -(-(ctx + 1 + nodes) // 16)  # each sequence's pages of 16 slots
    cache = KVCache(model.spec, seqs * pages, 16, device, dtype)

    def query(b: int) -> SeqQuery:
        k, first = (nodes if b < seqs - plain else 0), 16 * pages * b
        return SeqQuery(tokens=[1], ctx=ctx, index=list(range(first, first + ctx + 1)), nodes=[2] * k,
                        parents=tuple(range(-1, k - 1)), spec_slots=list(range(first + ctx + 1, first + ctx + 1 + k)))

    step = StepBatch.pack([query(b) for b in range(seqs)], device)
    return lambda: model.forward(step, cache)


def layer_probes(layers: int, device: str, ctx: int = 8) -> dict:
    """A bare decode forward of a random model with `layers` layers of the trained family's shape
    (EW_SPEC), one sequence over `ctx` keys: `layer{layers}`. Its growth per layer, less what the
    cost model charges for the layer's weight products (`layer_time`), is the host time of a
    real-sized layer: measured here, 130-250 us a layer more than a HOST_SPEC layer."""
    return {f"layer{layers}": forward_probe(layers, device, shape=EW_SPEC, ctx=ctx)}


def layer_products_time(gemm_rows: dict, peak: float, stream_bw: float, layers: int,
                        warm: dict | None = None, cache_bytes: float = 0, shapes: dict | None = None,
                        warm_shapes: dict | None = None) -> float:
    """What the cost model charges for one EW_SPEC layer's weight products at one row, in a model
    of `layers` such layers (the layer probes'), on the measured matmul curves (`gemm_rows`, and
    `warm` where that model's weights fit `cache_bytes` of last-level cache: {KiB: [[rows,
    fraction], ...]}; `shapes` and `warm_shapes` the same by shape, {"KxN": [[rows, fraction],
    ...]}) and streaming rate: the larger of their compute and their weights' streaming time.
    Taking off the price, not the products as timed beside the probe, keeps a
    step of the family's shape right (its host time plus the priced products is the layer as
    timed)."""
    from dataclasses import replace

    from sim.hardware import hardware_from_node
    from sim.specio import Node
    profile = {"preset": "cpu", "tflops": {"fp32": peak / 1e12}, "memory_tb_s": stream_bw / 1e12,
               "eta_compute": 1.0, "eta_memory": 1.0, "launch_us": 0.0}
    if gemm_rows:  # the profile's own form, {KiB: [[rows, fraction], ...]}
        profile["gemm_rows"] = gemm_rows
        if warm:
            profile |= {"gemm_rows_warm": warm, "cache_mb": cache_bytes / 2**20}
        profile |= {"gemm_shapes": shapes} if shapes else {}
        profile |= {"gemm_shapes_warm": warm_shapes} if warm and warm_shapes else {}
    hw = hardware_from_node(Node(profile, None, "hardware"), Path(".")).for_weights(replace(EW_SPEC, layers=layers).weight_bytes)
    cost = ForwardCost(replace(EW_SPEC, layers=1), hw, lm_head=False)
    _, _, _, compute, memory = cost._token_part(1, 0)
    return max(compute, memory)


def layer_time(t: dict, deep: int, products_s: float) -> float:
    """A real-sized layer's host time from layer_probes at 1 and `deep` layers (their mean
    times): the forwards' difference per layer, less `products_s`, the cost model's price of
    the layer's products (layer_products_time); never negative."""
    return max(0.0, extra_per_unit(t["layer1"], t[f"layer{deep}"], deep - 1) - products_s)


def pass_fixed_time(measured_s: float, layer_s: float) -> float:
    """A pass's fixed host time (step_s, pass_s) from a probe's time beyond its layers,
    `measured_s`: less its LM head's LM_HEAD_KERNELS launches at layer_s / KERNELS_PER_LAYER each,
    which the cost model charges every pass with an LM head on top (sim.cost.ForwardCost); never
    negative. So the cost model prices such a pass's fixed part as measured, its LM head's host
    time once."""
    return max(0.0, measured_s - LM_HEAD_KERNELS * layer_s / KERNELS_PER_LAYER)


def engine_step(batch: int, device: str, traffic=None) -> float:
    """Mean decode-step duration of the engine (its own clock) on a 1-layer tiny random model,
    `batch` sequences decoding 48 tokens each after a 16-token prompt, amid `traffic`
    (validation.traffic.Traffic) if given."""
    return float(statistics.mean(_decode_steps(batch, device, {"scheme": "none"}, 48, traffic)["duration"]))


NGRAM_SEQS, NGRAM_PROMPT = (1, 16), 128  # the family's traces' prompts: lookups over 128-176 tokens


def ngram_probe(device: str, traffic=None, checkpoint: dict | None = None) -> dict:
    """The engine's prompt lookup (engine.ngram's planner, K = 4, trigrams) in decode steps of
    NGRAM_SEQS' sequences after NGRAM_PROMPT-token prompts: {"ngram{seqs}": mean drafting time
    of a step}, amid `traffic` if given, on random weights of `checkpoint`'s shape (default the
    1-layer hidden-64 probe model). In the engine's runs of the family a lookup reads 5-8x
    what a tight loop of them does (81 against 8-15 us a sequence at concurrency 1): the numpy
    calls run cold between the model's passes."""
    entry = {"scheme": "ngram", "k": 4, "ngram": 3}
    return {f"ngram{b}": float(statistics.mean(_decode_steps(b, device, entry, 48, traffic, NGRAM_PROMPT,
                                                             checkpoint=checkpoint or TINY_CHECKPOINT)["draft_time"]))
            for b in NGRAM_SEQS}


def ngram_times(t: dict) -> tuple[float, float]:
    """(seconds per call, per sequence) of prompt lookup from ngram_probe's times: the growth
    from NGRAM_SEQS' few sequences to its many, per sequence, and the rest of the few's call
    (neither negative) -> `ngram_call_us`, `ngram_seq_us`."""
    b0, b1 = NGRAM_SEQS
    per_seq = max(0.0, (t[f"ngram{b1}"] - t[f"ngram{b0}"]) / (b1 - b0))
    return max(0.0, t[f"ngram{b0}"] - b0 * per_seq), per_seq


TINY_CHECKPOINT = {"random_shape": "tiny", "layers": 1, "hidden": 64, "heads": 4, "kv_heads": 2, "head_dim": 16,
                   "ffn": 128, "vocab": 256}  # the probes' 1-layer tiny random model


def checkpoint_of(model: ModelSpec) -> dict:
    """An engine checkpoint mapping of random weights of `model`'s own shape."""
    from engine.checkpoint import SHAPE_KEYS
    return {"random_shape": "tiny"} | {k: int(getattr(model, k)) for k in SHAPE_KEYS}


def probe_engine(batch: int, device: str, entry: dict, tokens: int, prompt: int = 16, checkpoint: dict = TINY_CHECKPOINT):
    """(trace, model, drafters or None, requests) of an engine probe: random weights of
    `checkpoint`'s shape, `batch` sequences decoding `tokens` tokens each after a `prompt`-token
    prompt with the speculation `entry`, all at once (closed, concurrency `batch`)."""
    import tempfile

    import yaml

    from engine.checkpoint import resolve
    from sim.spec import load_trace
    from sim.workload import make_requests
    doc = {"version": 1, "name": "calibrate-step", "seed": 1, "hardware": "cpu", "model": "tiny",
           "serving": {"max_num_seqs": batch, "max_num_batched_tokens": max(4096, batch * prompt), "page_size": 16,
                       "kv_pages": batch * max(64, 2 * (prompt + tokens) // 16 + 2), "paging": "indexshare"},
           "workload": {"requests": batch, "arrival": {"process": "closed", "concurrency": batch},
                        "prompt_tokens": {"dist": "fixed", "value": prompt},
                        "output_tokens": {"dist": "fixed", "value": tokens}},
           "speculation": [entry],
           "engine": {"checkpoint": checkpoint, "device": device}}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t.yaml"
        path.write_text(yaml.safe_dump(doc))
        trace = load_trace(path)
    source = resolve(trace)
    model = source.build()
    drafters = source.drafters(model) if entry["scheme"] != "none" else None
    return trace, model, drafters, make_requests(trace.workload, trace.seed)


def _decode_steps(batch: int, device: str, entry: dict, tokens: int, traffic=None, prompt: int = 16,
                  passes: bool = False, checkpoint: dict = TINY_CHECKPOINT) -> dict:
    """The step columns (numpy arrays) of the decode steps with every sequence in them, of the
    engine on random weights of `checkpoint`'s shape (default a 1-layer tiny model, hidden 64),
    `batch` sequences decoding `tokens` tokens each after a `prompt`-token prompt with the
    speculation `entry`; with `traffic`, every target and
    drafter pass followed by its read and the engine timed on its clock (the reads left out); with
    `passes`, a column "draft_pass_time": the seconds of the step's drafter passes and input
    projections within its draft_time (validation.drafter_host.PassClock)."""
    from engine.runner import run_scheme
    from validation.drafter_host import PassClock
    trace, model, drafters, requests = probe_engine(batch, device, entry, tokens, prompt, checkpoint)
    clock = time.perf_counter
    if traffic is not None:
        traffic.wrap(model)
        traffic.wrap_drafters(drafters)
        clock = traffic.clock
    timer = PassClock(clock, device_sync(device)) if passes else None
    if timer is not None:
        timer.wrap(model, drafters)
    res = run_scheme(trace, trace.speculation[0], requests, model, drafters=drafters, clock=clock)
    cols = res.result.steps.columns()
    if timer is not None:
        steps = timer.steps[1:]  # the first target pass is the runner's untimed warm-up, before any step
        assert len(steps) == len(cols["draft_time"]), "one target pass a step"
        cols["draft_pass_time"] = np.asarray(steps)
    keep = (cols["batch_size"] == batch) & (cols["prefill_tokens"] == 0)
    return {k: v[keep] for k, v in cols.items()}


def allocator_op() -> float:
    from sim.kv import KVAllocator
    kv = KVAllocator(4096, 16, "indexshare")
    t0 = time.perf_counter()
    for i in range(2000):
        kv.grow(i, 16)  # one page each
        kv.release(i)
    return (time.perf_counter() - t0) / 4000


SPEED_WINDOW_S = 2.0  # one call of the speed probe: a contiguous timing this long
SPEED_BLOCK_S = 0.1  # cut into blocks this long


def speed_probe(device: str, window_s: float = SPEED_WINDOW_S, block_s: float = SPEED_BLOCK_S):
    """The host's speed over a short window: a 1-layer forward (forward_probe) called back to back
    for `window_s`, the rate of each `block_s` block (calls over their summed time), as (the
    window's start in seconds on the monotonic clock, [block rates]); sim.speed.spread_of and
    drift_of turn the windows of a calibration into speed_rates, speed_spell_s (within windows)
    and speed_drift_rates, speed_drift_s (between them)."""
    fn, sync = forward_probe(1, device), device_sync(device)

    def call() -> tuple[float, list[float]]:
        rates, n, busy = [], 0, 0.0
        sync()
        start = block = time.perf_counter()
        while True:
            t0 = time.perf_counter()
            fn()
            sync()
            t1 = time.perf_counter()
            n, busy = n + 1, busy + (t1 - t0)
            if t1 - block >= block_s:
                rates.append(n / busy)
                n, busy, block = 0, 0.0, t1
                if t1 - start >= window_s:
                    return start, rates
    return call
