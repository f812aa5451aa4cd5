"""validation.calibrate in its small CPU form: every probe measures something and the profile it
writes loads as a hardware spec whose figures are the measured ones."""
from pathlib import Path

import pytest

from sim.hardware import hardware_from_node
from sim.specio import Node
from validation.calibrate import main, measure, profile_yaml

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_small_calibration_writes_a_loadable_profile(tmp_path):
    m = measure(size_mb=16, gemm_n=128, repeats=2)
    for key in ("copy_bw", "stream_bw", "flops_fp32", "launch_s", "layer_s", "step_s", "seq_s", "alloc_op_s",
                "multi_query_s", "draft_seq_s"):
        assert m[key] >= 0, key
    assert m["rounds"] == 2
    # matmul curves at the small form's two sizes (32, 128 KiB) and rows 1, 4, 16: positive rates
    assert sorted(m["gemm_rows"]) == [32, 128]
    assert all([r for r, _ in c] == [1, 4, 16] and all(f > 0 for _, f in c) for c in m["gemm_rows"].values())
    assert 1e8 < m["copy_bw"] < 1e12 and 1e8 < m["flops_fp32"] < 1e13
    path = tmp_path / "cpu-measured.yaml"
    path.write_text(profile_yaml(m, "test CPU", 8, "test"))
    hw = hardware_from_node(Node(str(path), None, "hardware"), Path("."))
    assert hw.peak("fp32") == pytest.approx(m["flops_fp32"], rel=1e-3)
    assert hw.mem_bw * hw.eta_memory == pytest.approx(m["stream_bw"], rel=1e-3)
    assert hw.step_overhead_s == pytest.approx(m["step_s"], rel=1e-2, abs=1e-7)
    assert hw.draft_seq_s == pytest.approx(m["draft_seq_s"], rel=1e-2, abs=1e-7)
    assert [b for b, _ in hw.gemm_rows] == [32 * 1024, 128 * 1024]
    assert hw.gemm_rows[0][1] == tuple((r, f) for r, f in m["gemm_rows"][32])


def test_cli_writes_where_asked(tmp_path, capsys):
    out = tmp_path / "x.yaml"
    assert main(["--out", str(out), "--size-mb", "8", "--gemm", "64", "--repeats", "1"]) == 0
    assert out.read_text().startswith("# Measured by")
