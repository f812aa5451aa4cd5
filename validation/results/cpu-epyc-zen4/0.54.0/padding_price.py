"""The cost model's price of padding.py's calls (one layer's attention of the family's shape:
its roofs and everything the profile charges beside them, as validation.reuse.attention_price
takes it), lengths even and spread, and the spread's extra: what padding.txt measured beside it.

    python validation/results/cpu-epyc-zen4/0.54.0/padding_price.py PROFILE.yaml"""
import sys
from dataclasses import replace
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from padding import LAYOUTS, layouts  # noqa: E402
from sim.cost import ForwardCost, Work, several_rows  # noqa: E402
from sim.hardware import hardware_from_node  # noqa: E402
from sim.models import model_from_node  # noqa: E402
from sim.specio import Node  # noqa: E402


def main(profile: str) -> None:
    spec = model_from_node(Node("tiny", None, "model"), ROOT)
    doc = yaml.safe_load(Path(profile).read_text())
    hw = replace(hardware_from_node(Node(doc, None, "hardware"), Path(".")), launch_s=0.0).for_weights(spec.weight_bytes)
    cost = ForwardCost(spec, hw, layers=1, lm_head=False)

    def price(lens, q):
        seqs = [(q, n) for n in lens]
        t = q - 1
        w = Work(tokens=q * len(lens), seqs=len(lens), pairs=sum(q * (n - t) + t * (t + 1) // 2 for n in lens),
                 kv_read=sum(n - t for n in lens), lm_tokens=0, **several_rows(seqs))
        return float(cost(w).time) - float(cost._token_part(q * len(lens), 0)[0])
    for S, q, mean in LAYOUTS:
        even, spread = layouts(S, mean)
        pe, ps = price(even, q), price(spread, q)
        print(f"{S:2} sequences, {q} rows: priced even {pe * 1e6:7.1f} us, spread {ps * 1e6:7.1f} us; "
              f"spread over even {(ps - pe) * 1e6:+7.1f} us a call, {(ps - pe) / S * 1e6:+5.1f} us a sequence")


if __name__ == "__main__":
    main(*sys.argv[1:])
