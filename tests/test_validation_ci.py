"""Issue 7's CI form of the validation: calibrate this machine, then run a small trace through the
engine and the simulator; the end-to-end throughput error must stay within THROUGHPUT_BOUND.

The bound is what this CPU engine and cost model reach in a noisy shared 2-core VM (README,
"Validation"); the project's target is 5%, its goal 2%."""
import json

import pytest
import yaml

from validation import calibrate
from validation.compare import compare

THROUGHPUT_BOUND = 0.25

TRACE = {
    "version": 1, "name": "ci-validation", "seed": 5, "hardware": "cpu", "model": "tiny",
    "serving": {"max_num_seqs": 8, "max_num_batched_tokens": 1024, "page_size": 16, "kv_pages": 512,
                "paging": "indexshare"},
    "workload": {"requests": 8, "arrival": {"process": "closed", "concurrency": 4},
                 "prompt_tokens": {"dist": "fixed", "value": 96},
                 "output_tokens": {"dist": "fixed", "value": 48}, "temperature": 0.0},
    "speculation": [{"scheme": "none"}, {"scheme": "eagle", "depth": 3}, {"scheme": "draft", "k": 3}],
    "sweep": {"concurrency": [1, 4]},
    "engine": {"checkpoint": {"random_shape": "tiny"}, "backend": "torch", "device": "cpu"},
}


@pytest.mark.slow
def test_end_to_end_throughput_error_is_bounded(tmp_path, one_torch_thread):
    hw = tmp_path / "cpu-measured.yaml"
    assert calibrate.main(["--out", str(hw), "--size-mb", "128", "--gemm", "512", "--repeats", "5",
                           "--threads", "1"]) == 0
    path = tmp_path / "trace.yaml"
    path.write_text(yaml.safe_dump(TRACE))
    result = compare(path, tmp_path / "cmp", hw)
    errs = {(r["label"], r["concurrency"]): r["errors"]["throughput_tok_s"] for r in result["runs"]}
    print(json.dumps({f"{k[0]}@{k[1]}": round(v, 3) for k, v in errs.items()}))
    assert len(errs) == 6
    bad = {k: v for k, v in errs.items() if abs(v) > THROUGHPUT_BOUND}
    assert not bad, f"throughput error beyond {THROUGHPUT_BOUND:.0%}: {bad}"
    for r in result["runs"]:
        assert r["errors"]["allocator_ops"] is None or abs(r["errors"]["allocator_ops"]) <= 0.05
