"""Small builders shared by the simulator tests (not a test module)."""
from __future__ import annotations

import copy
from pathlib import Path

import yaml

from sim.spec import load_trace

BASE = {
    "version": 1, "name": "t", "seed": 1, "hardware": "h100-sxm", "model": "llama-3.2-1b",
    "serving": {"max_num_seqs": 8, "max_num_batched_tokens": 512, "page_size": 16, "paging": "indexshare"},
    "workload": {"requests": 40, "arrival": {"process": "poisson", "rate_per_s": 50.0},
                 "prompt_tokens": {"dist": "uniform", "min": 8, "max": 400},
                 "output_tokens": {"dist": "uniform", "min": 1, "max": 60}},
    "speculation": [{"scheme": "none"}],
}


def write_trace(tmp_path: Path, base: dict = BASE, **overrides) -> Path:
    """`base` with top-level sections replaced or (for dict sections) updated, written as YAML."""
    doc = copy.deepcopy(base)
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(doc.get(key), dict):
            doc[key].update(value)
        else:
            doc[key] = value
    path = tmp_path / f"{doc['name']}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def make_trace(tmp_path: Path, **overrides):
    return load_trace(write_trace(tmp_path, **overrides))


# the engine's smallest random model (hidden 64, one layer): a trace on it runs in seconds
TINY_ENGINE = {"checkpoint": {"random_shape": "llama-3.2-1b", "layers": 1, "hidden": 64, "heads": 4, "kv_heads": 2,
                              "head_dim": 16, "ffn": 128, "vocab": 256}}


def tiny_engine_trace(tmp_path: Path, requests: int, prompt: int, output: int, k: int, **overrides) -> Path:
    """A closed-loop trace of plain decoding and prompt lookup (`k` drafted tokens) on TINY_ENGINE,
    `requests` requests of `prompt` + `output` tokens, all running at once."""
    return write_trace(tmp_path, hardware="cpu", engine=TINY_ENGINE,
                       serving={"max_num_seqs": requests, "kv_pages": 16 * requests},
                       workload={"requests": requests, "arrival": {"process": "closed", "concurrency": min(requests, 2)},
                                 "prompt_tokens": {"dist": "fixed", "value": prompt},
                                 "output_tokens": {"dist": "fixed", "value": output}},
                       speculation=[{"scheme": "none"}, {"scheme": "ngram", "k": k}], **overrides)

