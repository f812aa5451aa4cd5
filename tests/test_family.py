"""The trained `tiny` family: its sim preset matches its checkpoint, the engine loads it and reads
the family's held-out prompts, and greedy prompt lookup stays lossless on real text."""
import json
from dataclasses import fields

import pytest
import torch

from engine.checkpoint import _family_path, family_prompt
from engine.cli import main as engine_main
from engine.corpus import load_prompts
from sim.models import model_from_node
from sim.specio import Node
from tests.helpers import write_trace

pytestmark = pytest.mark.usefixtures("one_torch_thread")

FAMILY = {"checkpoint": "tiny", "prompts": "code", "backend": "torch", "device": "cpu"}


def test_sim_preset_matches_the_checkpoint():
    from engine.target import TargetConfig
    meta = torch.load(_family_path("tiny"), map_location="cpu", weights_only=True)
    trained = TargetConfig(**meta["model"]).spec()
    preset = model_from_node(Node("tiny", None, "model"), _family_path("tiny").parent)
    for f in fields(trained):
        assert getattr(preset, f.name) == getattr(trained, f.name), f.name


def test_family_prompts_come_from_the_held_out_set():
    code = load_prompts("code")
    assert family_prompt("code", 3, 40) == code[3][:40]
    assert family_prompt("code", len(code) + 3, 40) == code[3][:40]
    long = family_prompt("text", 0, len(load_prompts("text")[0]) + 5)
    assert long[:len(load_prompts("text")[0])] == load_prompts("text")[0]


def test_engine_runs_the_family_losslessly(tmp_path):
    trace = write_trace(tmp_path, model="tiny", hardware="cpu", engine=FAMILY,
                        serving={"max_num_seqs": 4, "kv_pages": 128},
                        workload={"requests": 3, "arrival": {"process": "closed", "concurrency": 3},
                                  "prompt_tokens": {"dist": "fixed", "value": 48},
                                  "output_tokens": {"dist": "fixed", "value": 12}, "temperature": 0.0},
                        speculation=[{"scheme": "none"}, {"scheme": "ngram", "k": 3, "acceptance": {"mean_accepted": 1.5}}])
    out = tmp_path / "out"
    assert engine_main(["run", str(trace), "--out", str(out), "--save-tokens", "--quiet", "--no-progress"]) == 0
    none = (out / "runs" / "none-open-tokens.jsonl").read_text()
    assert none == (out / "runs" / "ngram-open-tokens.jsonl").read_text()
    assert all(len(json.loads(line)["tokens"]) == 12 for line in none.splitlines())
    report = json.loads((out / "report.json").read_text())
    assert report["engine"]["prompts"] == "code" and report["model"]["name"] == "tiny"


@pytest.mark.parametrize("engine,path", [({"checkpoint": "huge"}, "engine.checkpoint"),
                                         ({"checkpoint": "tiny", "prompts": "poetry"}, "engine.prompts"),
                                         ({"checkpoint": {"random_shape": "llama-3.2-1b", "layers": 1}, "prompts": "code"},
                                          "engine.prompts")])
def test_bad_family_sections(tmp_path, capsys, engine, path):
    trace = write_trace(tmp_path, engine=engine)
    assert engine_main(["run", str(trace), "--out", str(tmp_path / "o"), "--quiet", "--no-progress"]) == 2
    assert f"{path}:" in capsys.readouterr().err
