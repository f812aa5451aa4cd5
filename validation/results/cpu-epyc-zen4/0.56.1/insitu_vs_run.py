"""Does the in-situ probe's run time the family's products as the family's own runs do? Rounds
alternate three arms at each concurrency, every one timed by ProductClock, plain decoding:
  probe   the in-situ probe's call (validation.reuse.insitu_probe: random weights of the family's
          shape, every sequence at once, 128-token prompts, 20 steps timed): its layers' and LM
          head's products a step (what gemm_step divides by the warm curves);
  random  the same engine set-up (validation.host_probes.probe_engine, random weights) decoding
          64 tokens after 128-token prompts;
  family  traces/family-schemes.yaml's `none` on its trained checkpoint (16 requests, closed);
  mid     (with --mid) the in-situ probe's call after 160-token prompts: the family's runs'
          median context while decoding (128-token prompts, 64 tokens out).

    python validation/results/cpu-epyc-zen4/0.56.1/insitu_vs_run.py ROUNDS [CONCURRENCY ...] [--mid]

Prints each round's medians of the products a step (ms), and each arm's median over rounds."""
import importlib.util
import statistics
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT))
from engine.checkpoint import resolve  # noqa: E402
from engine.host_memory import retain_freed_memory  # noqa: E402
from engine.runner import run_scheme  # noqa: E402
from sim.spec import load_trace  # noqa: E402
from validation.host_probes import checkpoint_of, probe_engine  # noqa: E402
from validation.reuse import insitu_probe  # noqa: E402

_spec = importlib.util.spec_from_file_location("forward_parts", Path(__file__).with_name("forward_parts.py"))
forward_parts = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(forward_parts)


def main(argv: list[str]) -> None:
    mid = "--mid" in argv
    argv = [a for a in argv if a != "--mid"]
    rounds, concs = int(argv[0]), [int(c) for c in argv[1:]] or [1, 4]
    arms = ("probe", "random", "family") + (("mid",) if mid else ())
    torch.set_num_threads(1)
    retain_freed_memory()
    trace = load_trace(ROOT / "traces/family-schemes.yaml")
    source = resolve(trace)
    spec = source.spec
    got: dict = {}
    for r in range(rounds):
        for c in concs:
            t = insitu_probe(spec, "cpu", (c,), 20, 128)()
            probe = t[f"reuselayers{c}"] + t[f"reuselm{c}"]
            rtrace, model, _, requests = probe_engine(c, "cpu", {"scheme": "none"}, 64, 128, checkpoint_of(spec))
            random = statistics.median(s["products"] for s in forward_parts.clocked_steps(
                model, lambda: run_scheme(rtrace, rtrace.speculation[0], requests, model), c))
            family = statistics.median(s["products"] for s in forward_parts.clocked_steps(*forward_parts.family_run(source, trace, c), c))
            got_r = {"probe": probe, "random": random, "family": family}
            if mid:
                t = insitu_probe(spec, "cpu", (c,), 20, 160)()
                got_r["mid"] = t[f"reuselayers{c}"] + t[f"reuselm{c}"]
            for arm, v in got_r.items():
                got.setdefault((c, arm), []).append(v)
            print(f"round {r + 1} c={c}: " + " ".join(f"{a} {v * 1e3:.3f}" for a, v in got_r.items()) + " ms", flush=True)
    for c in concs:
        med = {arm: statistics.median(got[(c, arm)]) * 1e3 for arm in arms}
        print(f"c={c} median over rounds: probe {med['probe']:.3f}, " + ", ".join(
            f"{a} {med[a]:.3f} ({med[a] / med['probe']:.3f}x)" for a in arms[1:]) + " ms")


if __name__ == "__main__":
    main(sys.argv[1:])
