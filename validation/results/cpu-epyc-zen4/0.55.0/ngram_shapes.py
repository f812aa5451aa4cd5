"""The calibration's prompt-lookup probe on its hidden-64 model against the family's shape, and the
family's own `ngram` runs, paired in one process.

    python validation/results/cpu-epyc-zen4/0.55.0/ngram_shapes.py ROUNDS

Each round: validation.host_probes.ngram_probe on the 1-layer hidden-64 model (the calibration's
until 0.55.0) and on random weights of the family's shape (checkpoint_of the tiny model), each
read as (ngram_call_us, ngram_seq_us) by ngram_times; then traces/family-schemes-c16.yaml's
`ngram` at concurrency 1 and 16 (trained weights, closed loop), the median drafting time of its
steps with every sequence decoding, by batch size (1 and 16), against each probe's price of a
step of that batch (call + batch x per sequence)."""
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT))
from engine.cli import build  # noqa: E402
from engine.host_memory import retain_freed_memory  # noqa: E402
from engine.runner import run_scheme  # noqa: E402
from sim.spec import load_trace  # noqa: E402
from sim.workload import make_requests  # noqa: E402
from validation.host_probes import checkpoint_of, ngram_probe, ngram_times  # noqa: E402


def main(rounds: str) -> None:
    torch.set_num_threads(1)
    retain_freed_memory()
    fam = load_trace(ROOT / "traces" / "family-schemes-c16.yaml")
    source, model, drafters = build(fam)
    ngram = next(s for s in fam.speculation if s.label == "ngram")
    print(f"# {' '.join(sys.argv)}  ({time.strftime('%H:%M:%S')})")
    for k in range(int(rounds)):
        probes = {name: ngram_times(ngram_probe("cpu", checkpoint=ck))
                  for name, ck in (("hidden-64", None), ("family", checkpoint_of(fam.model)))}
        runs = {}
        for c in (1, 16):
            res = run_scheme(fam, ngram, make_requests(fam.workload, fam.seed, c), model, prompts=source.prompts,
                             drafters=drafters)
            cols = res.result.steps.columns()
            runs[c] = statistics.median(float(cols["draft_time"][i]) for i in range(len(cols["draft_time"]))
                                        if int(cols["batch_size"][i]) == c and not cols["prefill_tokens"][i])
        line = "  ".join(f"{name} {call * 1e6:5.1f} + {seq * 1e6:4.1f}/seq" for name, (call, seq) in probes.items())
        print(f"round {k + 1}: probes {line};  family's runs: " + "  ".join(
            f"at {c}: {t * 1e6:5.1f} us (priced " + ", ".join(f"{(call + c * seq) / t:.2f}" for call, seq in probes.values())
            + ")" for c, t in runs.items()), flush=True)
    print(f"# end {time.strftime('%H:%M:%S')}")


if __name__ == "__main__":
    main(*sys.argv[1:])
