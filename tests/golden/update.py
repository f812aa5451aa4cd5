"""Rewrite the committed golden report after an intended change: python -m tests.golden.update"""
import json
from pathlib import Path

from sim.cli import run_trace
from sim.spec import load_trace

ROOT = Path(__file__).resolve().parents[2]

if __name__ == "__main__":
    report = run_trace(load_trace(ROOT / "traces" / "golden-tiny.yaml"), None, progress=False)
    (ROOT / "tests" / "golden" / "golden-tiny.json").write_text(json.dumps(report, indent=1) + "\n")
    print("wrote tests/golden/golden-tiny.json")
