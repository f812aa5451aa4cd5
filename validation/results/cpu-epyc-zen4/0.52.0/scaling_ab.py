"""How the engine's plain decode step grows from 1 to 4 sequences, against the simulator's price:
the family's `none`, runs at concurrency 1 and 4 alternating (each pair's order swapped from
pair to pair, so the host's drift falls on both alike), every target forward timed inside its
steps, each decode step (every sequence decoding, no prefill) priced as the simulator prices it
under the profile a comparison measured (COMPARE_DIR/sim-trace.yaml).

    python validation/results/cpu-epyc-zen4/0.52.0/scaling_ab.py COMPARE_DIR [PAIRS]

One thread, the engine's allocator settings, one untimed run at each level first. Prints per
pair the medians (ms) of the engine's step, its forward and the rest, and the ratio at 4 over 1
of each; then the medians over the pairs, against the simulator's (its forward, its host time
around the forward, and the whole step)."""
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))
from engine.runner import run_scheme  # noqa: E402
from sim.cost import ForwardCost, Work, host_time, verify_host  # noqa: E402
from sim.spec import load_trace  # noqa: E402
from sim.workload import make_requests  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "0.51.0"))
from reference_ab import family_engine, time_forwards  # noqa: E402


def decode_parts(trace, source, model, c: int, times: list, priced) -> tuple[list[float], list[float]]:
    """One run of `none` at concurrency c: the medians (s) over its decode steps of [step, forward,
    rest] as the engine took them, and of [forward, host, step] as the simulator prices them."""
    hw, fwd = priced
    times.clear()
    res = run_scheme(trace, trace.speculation[0], make_requests(trace.workload, trace.seed, c), model,
                     prompts=source.prompts)
    cols = res.result.steps.columns()
    fw = times[1:]  # the first is the runner's untimed warm-up
    assert len(fw) == len(cols["duration"])
    eng, sim = [], []
    for i, t in enumerate(fw):
        b, ctx = int(cols["batch_size"][i]), int(cols["context_tokens"][i])
        if cols["prefill_tokens"][i] or b != c:
            continue
        d = float(cols["duration"][i])
        price = fwd(Work(tokens=b, seqs=b, pairs=ctx + b, kv_read=ctx + b, lm_tokens=b)).time
        host = host_time(hw, b, int(cols["page_allocs"][i] + cols["page_frees"][i])) + verify_host(hw)
        eng.append((d, t, d - t))
        sim.append((price, host, price + host))
    med = lambda rows: [statistics.median(r[k] for r in rows) for k in range(3)]  # noqa: E731
    return med(eng), med(sim)


def main(compared: str, pairs: int = 6) -> None:
    trace, source, model, _ = family_engine()
    p = load_trace(Path(compared) / "sim-trace.yaml")
    priced = (p.hardware, ForwardCost(p.model, p.hardware, p.tp))
    times = time_forwards(model)
    for c in (1, 4):
        decode_parts(trace, source, model, c, times, priced)  # untimed
    ratios, sims = [], {}
    for i in range(pairs):
        got = {}
        for c in ((1, 4) if i % 2 == 0 else (4, 1)):
            got[c] = decode_parts(trace, source, model, c, times, priced)
            sims[c] = got[c][1]
        e1, e4 = got[1][0], got[4][0]
        ratios.append([b / a for a, b in zip(e1, e4)])
        print(f"pair {i + 1}: at 1 step {e1[0] * 1e3:.3f} = forward {e1[1] * 1e3:.3f} + rest {e1[2] * 1e3:.3f}; "
              f"at 4 step {e4[0] * 1e3:.3f} = forward {e4[1] * 1e3:.3f} + rest {e4[2] * 1e3:.3f}; "
              f"4 over 1: step {ratios[-1][0]:.3f}, forward {ratios[-1][1]:.3f}, rest {ratios[-1][2]:.3f}", flush=True)
    med = [statistics.median(r[k] for r in ratios) for k in range(3)]
    s1, s4 = sims[1], sims[4]
    print(f"medians over {pairs} pairs, 4 over 1: engine step {med[0]:.3f}, forward {med[1]:.3f}, rest {med[2]:.3f}; "
          f"simulator step {s4[2] / s1[2]:.3f} ({s4[2] / s1[2] / med[0] - 1:+.1%}), forward {s4[0] / s1[0]:.3f} "
          f"({s4[0] / s1[0] / med[1] - 1:+.1%}), host {s4[1] / s1[1]:.3f}")
    print(f"simulator (ms): at 1 forward {s1[0] * 1e3:.3f} + host {s1[1] * 1e3:.3f} = {s1[2] * 1e3:.3f}; "
          f"at 4 forward {s4[0] * 1e3:.3f} + host {s4[1] * 1e3:.3f} = {s4[2] * 1e3:.3f}")


if __name__ == "__main__":
    main(sys.argv[1], *(int(x) for x in sys.argv[2:]))
