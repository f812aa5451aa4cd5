"""Every shipped trace loads (DESIGN.md §9.11)."""
from pathlib import Path

import pytest

from sim.spec import load_trace

ROOT = Path(__file__).resolve().parents[1]
TRACES = sorted(ROOT.glob("traces/*.yaml")) + sorted(ROOT.glob("bench/traces/*.yaml"))
SHARED = ROOT.parent / "shared" / "data" / "azure-llm-2023"


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.name)
def test_trace_loads(path):
    if "replay" in path.read_text() and not SHARED.is_dir():
        pytest.skip("the Azure trace files live in ../shared/data/azure-llm-2023/, absent here")
    trace = load_trace(path)
    assert trace.num_pages > 0 and trace.speculation


def test_there_are_traces():
    assert len(TRACES) >= 5
