"""validation/gpu.sh: the GPU validation script, in its CPU form (the same steps at small sizes)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_gpu_script_cpu_form(tmp_path):
    env = {**os.environ, "PYTHON": sys.executable, "OUT_DIR": str(tmp_path)}
    proc = subprocess.run(["bash", str(ROOT / "validation" / "gpu.sh"), "--cpu"], env=env, capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert (tmp_path / "hardware-measured.yaml").exists()
    st = json.loads((tmp_path / "steptime" / "steptime.json").read_text())
    assert st["errors"]["points"] > 10 and "fit" in st
    for d in ("compare-random", "compare-family"):
        doc = json.loads((tmp_path / d / "comparison.json").read_text())
        assert doc["runs"] and all("throughput_tok_s" in r["errors"] for r in doc["runs"])
