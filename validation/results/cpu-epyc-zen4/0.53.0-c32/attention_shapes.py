"""The engine's attention call (the CPU backend's paged_attention, the family's geometry: 4 query
heads on 2 KV heads of 64) on random inputs, for sequences verifying short chains after a short
context, as the family's steps at 4-32 sequences take it, against the cost model's price of a
layer's attention on a comparison's profile.

    python validation/results/cpu-epyc-zen4/0.53.0-c32/attention_shapes.py PROFILE.yaml [CONTEXT] [TRAFFIC_MB]

For each sequences (4, 8, 16, 32) x query tokens a sequence (1: decoding; 2, 3, 6: a root and a
chain of drafts behind it), CONTEXT (default 160) keys before them: the call's mean seconds over 40
rounds of the calls interleaved one by one (validation.timing.interleaved_times), and the cost model's price of
one layer's attention for that work (sim.cost.ForwardCost on PROFILE, the family's shape, one
layer: the pass's price less its token part (products, elementwise passes) and less the pass's
host time for several query tokens, query_host, which a pass pays once). The call's fixed part
(launch_us and the step's host time price it) is in the timed call, not in the price: the
decoding rows say how large it is. TRAFFIC_MB (default 0): before each timed call, untimed, a
read of that many MiB of another buffer (as the rest of an engine step's passes sweep the
last-level cache between one layer's attention and the next step's)."""
import sys
from dataclasses import replace
from pathlib import Path

import torch
import yaml

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT))
from engine.cli import build  # noqa: E402
from kernels import get_ops  # noqa: E402
from sim.cost import ForwardCost, Work, alike_rows  # noqa: E402
from sim.hardware import hardware_from_node  # noqa: E402
from sim.spec import load_trace  # noqa: E402
from sim.specio import Node  # noqa: E402
from validation.probes import attention_args  # noqa: E402
from validation.timing import interleaved_times  # noqa: E402

SEQS, QUERIES = (4, 8, 16, 32), (1, 2, 3, 6)


def main(profile: str, context: str = "160", traffic_mb: str = "0") -> None:
    torch.set_num_threads(1)
    ctx = int(context)
    spec = build(load_trace(ROOT / "traces" / "family-schemes-c32.yaml"))[0].spec
    doc = yaml.safe_load(Path(profile).read_text())
    hw = replace(hardware_from_node(Node(doc, None, "hardware"), Path(".")), launch_s=0.0).for_weights(spec.weight_bytes)
    cost = ForwardCost(spec, hw, layers=1, lm_head=False)
    ops = get_ops("torch", check_values=False)
    calls = {}
    for s in SEQS:
        for q in QUERIES:
            args = attention_args("cpu", s, ctx, q, spec.heads, spec.kv_heads, drafts=True, head_dim=spec.head_dim)
            calls[(s, q)] = (lambda a=args: ops.paged_attention(*a, 0.125))
    buf = torch.ones(int(float(traffic_mb) * 2**18))  # (MiB / 4 bytes,) fp32
    t = interleaved_times(calls, "cpu", 40, between=(lambda: buf.sum()) if len(buf) else None)
    for (s, q), secs in t.items():
        keys = s * (ctx + q)
        multi = alike_rows(s * q, keys, s) if q > 1 else {}
        work = Work(tokens=s * q, seqs=s, pairs=s * (q * (ctx + q) - q * (q - 1) // 2), kv_read=keys, lm_tokens=0, **multi)
        price = (float(cost(work).time) - float(cost._token_part(s * q, 0)[0])
                 - float(cost.query_host(s * q, s))) * 1e6
        print(f"{s:2} sequences x {q} query tokens after {ctx} keys: timed {secs * 1e6:7.1f} us, priced {price:7.1f} us,"
              f" timed - priced {secs * 1e6 - price:7.1f} us ({(secs * 1e6 - price) / s:5.1f} a sequence)", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
