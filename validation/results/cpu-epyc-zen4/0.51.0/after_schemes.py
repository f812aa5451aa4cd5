"""Whether the engine's steps run slower after the other schemes' runs in the same process, as a
comparison's do: the family's `none` at concurrency 4, three runs in a fresh process, then one
run of every other scheme at 4 (drafters and all), then three runs of `none` again.

    python validation/results/cpu-epyc-zen4/0.51.0/after_schemes.py [ROUNDS]

One thread, the engine's allocator settings, one untimed run of `none` first; prints each run's
median decode-step time (every sequence decoding, no prefill), before and after, for each of
ROUNDS (default 2) rounds of the other schemes."""
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))
from engine.runner import run_scheme  # noqa: E402
from sim.workload import make_requests  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from reference_ab import decode_median, family_engine  # noqa: E402


def main(rounds: int = 2) -> None:
    trace, source, model, drafters = family_engine()
    requests = make_requests(trace.workload, trace.seed, 4)
    decode_median(trace, source, model, 4, None)  # untimed
    runs = [decode_median(trace, source, model, 4, None)[0] for _ in range(3)]
    print(f"fresh process: {statistics.median(runs) * 1e3:.3f} ms [{' '.join(f'{x * 1e3:.2f}' for x in runs)}]")
    for r in range(rounds):
        for scheme in trace.speculation[1:]:
            run_scheme(trace, scheme, requests, model, prompts=source.prompts, drafters=drafters)
        runs = [decode_median(trace, source, model, 4, None)[0] for _ in range(3)]
        print(f"after round {r + 1} of the other schemes' runs: {statistics.median(runs) * 1e3:.3f} ms "
              f"[{' '.join(f'{x * 1e3:.2f}' for x in runs)}]")


if __name__ == "__main__":
    main(*(int(x) for x in sys.argv[1:]))
