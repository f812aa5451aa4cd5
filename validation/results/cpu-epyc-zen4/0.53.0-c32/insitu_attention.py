"""Whether the calibration's in-situ probe could measure the verify passes' unpriced attention:
its engine (validation.host_probes.probe_engine: random weights of the family's shape, every
sequence at once after a 128-token prompt) decoding plainly and verifying an EAGLE chain of 5
(random drafts, all rejected: 6 query tokens a sequence every step), at 4, 16 and 32 sequences.

    python validation/results/cpu-epyc-zen4/0.53.0-c32/insitu_attention.py PROFILE.yaml [ROUNDS]

For each run, over its steps whose target products all ran the whole batch's rows: the median
of a later layer's attention call (the backend's paged_attention inside the target's forward,
as verify_products.py times it) and of the steps' keys; each priced on PROFILE as
verify_products.layer_price prices it. Prints, per sequences, the medians over ROUNDS (default
3) rounds of the chain's attention beyond its price less decoding's: what verify_products.txt
read on the family's own engine (+392/+415 us at 16, +778/+843 at 32 for 5- and 6-token chains)."""
import statistics
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from engine.cli import build  # noqa: E402
from engine.host_memory import retain_freed_memory  # noqa: E402
from engine.runner import run_scheme  # noqa: E402
from sim.spec import load_trace  # noqa: E402
from validation.host_probes import checkpoint_of, probe_engine  # noqa: E402
from validation.reuse import ProductClock  # noqa: E402
from verify_products import full_batch, layer_price, time_later_calls  # noqa: E402

SEQS, DEPTH, TOKENS, PROMPT = (4, 16, 32), 5, 32, 128


def attention_run(spec, r: int, depth: int) -> tuple[float, float]:
    """(median seconds of a later layer's attention call, median keys) over the full-batch steps
    of one probe run: plain decoding (depth 0) or an EAGLE chain of `depth`."""
    entry = {"scheme": "eagle", "depth": depth} if depth else {"scheme": "none"}
    trace, model, drafters, requests = probe_engine(r, "cpu", entry, TOKENS, PROMPT, checkpoint_of(spec))
    clock = ProductClock(model)
    calls = time_later_calls(model, ("paged_attention",))["paged_attention"]
    with clock:
        run_scheme(trace, trace.speculation[0], requests, model, drafters=drafters)
    assert len(calls) == len(clock.steps)
    rows = r * (depth + 1)
    keep = full_batch(clock.steps, rows)
    layers = len(model.layers)
    return (statistics.median(calls[i] / (layers - 1) for i in keep),
            statistics.median(clock.steps[i]["keys"] for i in keep))


def main(profile: str, rounds: str = "3") -> None:
    torch.set_num_threads(1)
    retain_freed_memory()
    spec = build(load_trace(ROOT / "traces" / "family-schemes-c32.yaml"))[0].spec
    got: dict[int, list[float]] = {r: [] for r in SEQS}
    for i in range(int(rounds)):
        for r in SEQS:
            (plain, pk), (chain, ck) = attention_run(spec, r, 0), attention_run(spec, r, DEPTH)
            excess = (chain * 1e6 - layer_price(profile, spec, r, DEPTH + 1, ck)[1]) - (plain * 1e6 - layer_price(profile, spec, r, 1, pk)[1])
            got[r].append(excess)
            print(f"round {i + 1}, {r:2} sequences: attention plain {plain * 1e6:7.1f} us ({pk:.0f} keys), "
                  f"chain of {DEPTH} {chain * 1e6:7.1f} us ({ck:.0f} keys); the chain's beyond its price less decoding's {excess:+7.1f} us",
                  flush=True)
    print("medians: " + ", ".join(f"{r} sequences {statistics.median(v):+.0f} us" for r, v in got.items()))


if __name__ == "__main__":
    main(*sys.argv[1:])
