"""Is attention why the family's long-context decode points read slow? The step-time grid prices
decoding 16 sequences after 2048 tokens 20-24% under the engine in three grids (0.47.0), and a
2-chain there 9-16% under, while 3-chains read near. Here the family's shape (tiny) at those
points: the whole forward and its four attention calls alone (the arguments each layer passed,
timed back to back), interleaved over ROUNDS rounds, against the price of the whole
(validation.steptime.predict) and of its attention part (ForwardCost's attention roofs, host
terms for passes with several query tokens and the fused-attention terms). Run from the
repository root with the project's environment, alone, after a step-time grid wrote PROFILE:

  python validation/results/cpu-epyc-zen3/0.48.0/attention_alone.py PROFILE [ROUNDS]
"""
from __future__ import annotations

import statistics
import sys
from dataclasses import replace
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))
from sim.cost import ForwardCost  # noqa: E402
from sim.hardware import hardware_from_node  # noqa: E402
from sim.models import model_from_node  # noqa: E402
from sim.specio import Node  # noqa: E402
from validation.steptime import ROOT, grid, point_call, predict, work_of  # noqa: E402
from validation.timing import mean_time  # noqa: E402

POINTS = [("decode", 16, 2048), ("chain1", 16, 2048), ("chain2", 16, 2048), ("chain3", 16, 2048),
          ("mixed4", 16, 2048), ("decode", 16, 512), ("chain2", 16, 512), ("decode", 4, 2048),
          ("chain1", 4, 512), ("chain3", 4, 512), ("decode", 4, 512)]


def attention_price(spec, hw, w) -> float:
    """The attention part of ForwardCost's price of w: every layer's roofs, plus the host terms of
    passes with several query tokens and the fused-attention terms (sim/cost.py __call__)."""
    fc = ForwardCost(spec, replace(hw.for_weights(spec.weight_bytes), logit_s=0.0))
    run = fc.attn_flops_per_pair * (max(w.pairs, w.tokens * w.kv_read / w.seqs) if fc.attn_dense else w.pairs)
    b_kv = fc.kv_tok * (w.kv_read + w.tokens)
    c, m = run / fc.attn_fc, fc.kv_time(b_kv) + fc.attn_act_per_tok * w.tokens / fc.bw
    return float(fc.n_layers * fc.attention(c, m) + fc.query_host(w.tokens, w.seqs, w.mixed)
                 + fc.fused_time(w.multi_tokens, w.multi_kv))


def captured_attention(model, call):
    """One forward's attention calls as a call that reruns them all (their arguments as passed)."""
    args = []
    checked, unchecked = model.ops, model.ops_unchecked

    def grab(fn):
        def wrapped(*a, **k):
            args.append((fn, [x.clone() if isinstance(x, torch.Tensor) else x for x in a], k))
            return fn(*a, **k)
        return wrapped
    model.ops = replace(checked, paged_attention=grab(checked.paged_attention))
    model.ops_unchecked = replace(unchecked, paged_attention=grab(unchecked.paged_attention))
    call()
    model.ops, model.ops_unchecked = checked, unchecked
    return lambda: [fn(*a, **k) for fn, a, k in args]


def main() -> None:
    from engine.model import Model
    torch.set_num_threads(1)
    profile = Path(sys.argv[1])
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    hw = hardware_from_node(Node(str(profile), str(profile), "hardware"), ROOT)
    spec = replace(model_from_node(Node("tiny", "steptime", "model"), ROOT), bytes_per_weight=4.0, bytes_per_kv=4.0)
    model = Model.random(spec, seed=0, device="cpu", dtype=torch.float32, backend="torch")
    by_key = {(p["kind"], p["batch"], p["context"]): p for p in grid(False)}
    calls = []
    for key in POINTS:
        p = by_key[key]
        whole = point_call(model, p, "cpu")
        calls.append((key, p, whole, captured_attention(model, whole)))
    got = {key: ([], []) for key in POINTS}
    for r in range(rounds):
        for key, p, whole, attn in (calls if r % 2 == 0 else calls[::-1]):
            got[key][0].append(mean_time(whole, "cpu", 5, min_s=0.3))
            got[key][1].append(mean_time(attn, "cpu", 5, min_s=0.3))
    print(f"profile {profile}; {rounds} rounds, medians; attention = the forward's 4 calls alone")
    print(f"{'point':22} {'forward':>9} {'priced':>9} {'err':>7} | {'attention':>9} {'priced':>9} {'ratio':>6} | "
          f"{'rest':>8} {'priced':>8} {'ratio':>6}")
    for key, p, *_ in calls:
        fwd, att = (statistics.median(v) for v in got[key])
        pf, pa = predict(spec, hw, p), attention_price(spec, hw, work_of(p))
        print(f"{key[0]:7} B={key[1]:<3} ctx={key[2]:<5}  {fwd * 1e3:8.2f}m {pf * 1e3:8.2f}m {(pf - fwd) / fwd:+7.1%} | "
              f"{att * 1e3:8.2f}m {pa * 1e3:8.2f}m {pa / att:6.2f} | {(fwd - att) * 1e3:7.2f}m {(pf - pa) * 1e3:7.2f}m "
              f"{(pf - pa) / (fwd - att):6.2f}")


if __name__ == "__main__":
    main()
