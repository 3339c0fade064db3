"""Per-operator profile (performance counters) and memory on OpenVINO, through the real
CLI (issue 32)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import edgebuild
from tests.integration.profile_models import check_profile, read_report, write_project

pytest.importorskip("openvino", reason="the OpenVINO backend needs openvino")
pytestmark = pytest.mark.openvino


@pytest.mark.slow
def test_counters_add_up_and_name_the_fused_onnx_nodes(tmp_path: Path) -> None:
    recipe = write_project(tmp_path / "project", "intel-cpu")
    out = tmp_path / "out"
    done = edgebuild("run", str(recipe), "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    found = check_profile(read_report(out), "intel-cpu")
    rows = found["op_profile"]["rows"]
    convs = [r for r in rows if r["op_type"] == "Convolution"]
    # The CPU plugin runs each Conv with its Relu as one layer, and names its kernel.
    assert len(convs) == 4
    assert all(r["fused"] for r in convs)
    assert {tuple(r["onnx_nodes"]) for r in convs} == {(f"conv{i}", f"relu{i}")
                                                       for i in range(4)}
    assert all(r["exec"] for r in convs)
