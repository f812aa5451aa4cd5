"""Issue 7's CI form of the validation: `python -m validation compare --calibrate --repeats 4` runs
a small trace through the engine (four times; five until 0.57.0) and the simulator at concurrency 1, pricing the
simulator with a profile whose calibration probes ran a few at a time before each scheme's
engine run; each scheme's runs are pooled (all tokens over all time), as are the simulator's
draws. The end-to-end errors must stay within stated bounds:

* THROUGHPUT_BOUND on each scheme's throughput. On the shared 2-core development VM, whose speed
  drifts by a third within minutes, ten runs of this test with the calibration inside
  `compare` gave -34% to +34% (a calibration taken apart from the engine runs, as this test did
  before, gave -37% to +103%); three runs with the runs pooled and the calibration's
  differences interleaved gave -21% to +10%;
* SPEEDUP_BOUND on each speculative scheme's speedup over `none` (its throughput ratio), in
  which a machine-wide slowdown cancels: -23% to +26% over the ten runs, -22% to +5% over the
  three. Seven runs with three repeats on 2026-11-30 gave speedup errors of -41% to +17% (mean
  -16%: the simulator prices the random drafters' passes 18-27% above what the engine's planner
  takes, `compare`'s draft_time); one of the seven failed, so the test pools five runs. With
  the drafter passes priced as the drafters run them (pass_overhead_us without the target's
  index checks), two five-run tests gave throughput errors of -5% to +13% and speedup errors of
  -16% to +10% (mean -2%).

On the fifth VM with 0.22.0 (the host-time probes amid the model's memory traffic, the warm
curves a step apart, every probe's memory touched before it is timed), two runs gave throughput
errors of +3.9% to +16.3% and speedup errors of +2.4% to +8.5%; the bounds went from 60% and 40%
to 40% and 30%, which every pooled run above (since the drafter passes' pricing was mended)
would have passed.

On the same VM with 0.24.0, six runs. Alone, twice: +1.4% / +4.6% / -0.8% (none / eagle / draft;
speedup errors +3.2% and -2.2%), and -1.3% / -0.5% / +14.1% (+0.8% and +15.6%). Beside other work: one failed with -5.7% /
+25.5% / +6.0%, EAGLE's speedup error +33% (for 11 s of its six minutes another pytest process
shared the machine's caches); of three inside full suites run beside fresh-check's suite, two
passed and one failed with EAGLE's speedup error +36%. EAGLE's engine runs slow more than
`none`'s when another process shares the caches; CI runs alone. The bound stays; a run that
trips it is worth rerunning alone before anything is changed.

On the sixth VM with 0.30.0 (`--cycles 1`: one calibration probe cycle per engine run, the
matmul curves over pools shrunk with their rows), alone: -15.3% / -11.4% / -16.2%, speedup
errors +4.7% and -1.0%, in 333 s (846 s with 0.29.0's two full cycles).

On the Zen 4 VM with 0.56.1, alone, five repeats: +3.5% / +4.1% / -2.9%, speedup errors +0.6% and
-6.2%, in 505 s, of which 63 s were a last probe cycle after the engine's runs (each call of the
spread ran its rounded-up share, so five runs' calls overshot five cycles by five probes and
`complete` ran the sixth). With 0.57.0 (the calls' shares exact) and four repeats: +18.2% / +2.8% /
-4.0%, speedup errors -13.0% and -18.8%, in 424 s with the host about 1.5x slower than before
(`none`'s runs 2.6-3.0 s against 1.8 s; the probes 3.7% slower than the runs).

The project's target is 5%, its goal 2%; tighten these as the model improves."""
import json
import os
import subprocess
import sys

import pytest
import yaml

THROUGHPUT_BOUND = 0.4
SPEEDUP_BOUND = 0.30

TRACE = {
    "version": 1, "name": "ci-validation", "seed": 5, "hardware": "cpu", "model": "tiny",
    "serving": {"max_num_seqs": 8, "max_num_batched_tokens": 1024, "page_size": 16, "kv_pages": 512,
                "paging": "indexshare"},
    "workload": {"requests": 8, "arrival": {"process": "closed", "concurrency": 4},
                 "prompt_tokens": {"dist": "fixed", "value": 96},
                 "output_tokens": {"dist": "fixed", "value": 48}, "temperature": 0.0},
    "speculation": [{"scheme": "none"}, {"scheme": "eagle", "depth": 3}, {"scheme": "draft", "k": 3}],
    "sweep": {"concurrency": [1]},
    "engine": {"checkpoint": {"random_shape": "tiny"}, "backend": "torch", "device": "cpu"},
}


@pytest.mark.slow
def test_end_to_end_throughput_error_is_bounded(tmp_path):
    """In a fresh interpreter, as a user runs it (one thread)."""
    path = tmp_path / "trace.yaml"
    path.write_text(yaml.safe_dump(TRACE))
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
    args = ["validation", "compare", str(path), "--out", str(tmp_path / "cmp"), "--calibrate", "--repeats", "4",
            "--cycles", "1", "--threads", "1"]
    # 333 s on the sixth VM (0.30.0, one probe cycle per engine run; 356 s on the fifth with
    # 0.22.0's two), 424 s on the Zen 4 VM with 0.57.0 (four runs): room for a host twice as slow
    proc = subprocess.run([sys.executable, "-m", *args], env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    result = json.loads((tmp_path / "cmp" / "comparison.json").read_text())
    errs = {(r["label"], r["concurrency"]): r["errors"]["throughput_tok_s"] for r in result["runs"]}
    print(json.dumps({f"{k[0]}@{k[1]}": round(v, 3) for k, v in errs.items()}))
    assert len(errs) == 3
    bad = {k: v for k, v in errs.items() if abs(v) > THROUGHPUT_BOUND}
    assert not bad, f"throughput error beyond {THROUGHPUT_BOUND:.0%}: {bad}"
    base = 1 + errs[("none", 1)]
    speedup = {k[0]: (1 + v) / base - 1 for k, v in errs.items() if k[0] != "none"}
    print(json.dumps({f"speedup error {k}": round(v, 3) for k, v in speedup.items()}))
    bad = {k: v for k, v in speedup.items() if abs(v) > SPEEDUP_BOUND}
    assert not bad, f"speedup error beyond {SPEEDUP_BOUND:.0%}: {bad}"
    for r in result["runs"]:
        assert r["errors"]["allocator_ops"] is None or abs(r["errors"]["allocator_ops"]) <= 0.05
