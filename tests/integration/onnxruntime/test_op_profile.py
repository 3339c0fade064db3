"""Per-operator profile and memory on ONNX Runtime, through the real CLI (issue 32)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import edgebuild
from tests.integration.profile_models import check_profile, read_report, write_project

pytest.importorskip("onnxruntime", reason="the ONNX Runtime backend needs onnxruntime")
pytestmark = pytest.mark.onnxruntime


@pytest.mark.slow
def test_profile_adds_up_to_the_profiled_runs_and_maps_fused_nodes(tmp_path: Path) -> None:
    recipe = write_project(tmp_path / "project", "host-cpu")
    out = tmp_path / "out"
    done = edgebuild("run", str(recipe), "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    report = read_report(out)
    found = check_profile(report, "host-cpu")
    rows = found["op_profile"]["rows"]
    assert {r["exec"] for r in rows} == {"CPUExecutionProvider"}
    assert rows[0]["op_type"] == "Conv"  # four convs are nearly all of the time
    # ONNX Runtime's own per-run total (model_run) holds the nodes too.
    profile = found["op_profile"]
    assert profile["ops_ms"] <= profile["runtime_ms"] * 1.05
    # Its optimizer fused each Relu into its Conv: the row says it is a fused group.
    convs = [r for r in rows if r["op_type"] == "Conv"]
    assert len(convs) == 4 and all(r["fused"] and r["onnx_nodes"] for r in convs)
    summary = (out / "summary.md").read_text()
    assert "### Where the time and memory go: host-cpu" in summary and "| `Conv` |" in summary
    assert "runtime peak" in (out / "report.html").read_text()
