"""export-onnx on the real Fashion-MNIST CNN with both exporters, and its safety check."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from edgebuild.errors import StageError
from edgebuild.passes.export_onnx import ExportOnnx, ExportParams
from tests.integration.passes.conftest import context

pytest.importorskip("torch", reason="export-onnx needs torch")
pytestmark = pytest.mark.slow


def export(tmp_path: Path, **params: Any) -> dict[str, Any]:
    ctx = context(tmp_path)
    result = ExportOnnx().run(ctx, ExportParams(**params))
    assert (tmp_path / result.main).is_file()
    return result.metadata


@pytest.mark.parametrize("params", [{"exporter": "legacy", "opset": 13},
                                    {"exporter": "dynamo", "opset": 18}])
def test_both_exporters_match_pytorch(tmp_path: Path, params: dict[str, Any]) -> None:
    import numpy as np
    import onnxruntime as ort

    meta = export(tmp_path, **params)
    assert meta["check"]["samples"] == 2
    assert meta["check"]["max_abs_diff"] < 1e-4
    assert meta["graph"]["opset"] == params["opset"]
    session = ort.InferenceSession(str(tmp_path / "model.onnx"))
    batch = np.zeros((3, 1, 28, 28), np.float32)  # the dynamic batch axis works
    assert session.run(None, {"image": batch})[0].shape == (3, 10)


def test_check_fails_the_stage_beyond_tolerance(tmp_path: Path) -> None:
    with pytest.raises(StageError, match="export check failed: ONNX differs from PyTorch"):
        export(tmp_path, atol=0.0, rtol=0.0, check_samples=8)


def test_a_traced_branch_is_caught_and_script_keeps_it(tmp_path: Path) -> None:
    """A model with data-dependent control flow: the trace check fails the stage naming
    `capture: script`, which exports the branch as an ONNX If node."""
    import onnx

    from tests.conftest import REPO, edgebuild

    recipe = tmp_path / "flow.yaml"
    head = f"""\
name: flow
model: {{factory: {REPO / "tests" / "models" / "sign_gate.py"}:build}}
inputs: [{{name: x, shape: [1, 8]}}]
outputs: [y]
targets:
  host-cpu: {{gates: {{size: {{max_mb: 1}}}}}}
"""
    recipe.write_text(head + "passes: [export-onnx: {opset: 17}]\n")
    traced = edgebuild("run", str(recipe), "--out", str(tmp_path / "traced"))
    assert traced.returncode == 3, traced.stdout + traced.stderr
    assert "the traced model differs from eager PyTorch" in traced.stderr
    assert "capture: script" in traced.stderr and "Traceback" not in traced.stderr
    recipe.write_text(head + "passes: [export-onnx: {opset: 17, capture: script}]\n")
    scripted = edgebuild("run", str(recipe), "--out", str(tmp_path / "scripted"))
    assert scripted.returncode == 0, scripted.stdout + scripted.stderr
    (model,) = (tmp_path / "scripted" / "artifacts" / "host-cpu").glob("*.onnx")
    assert "If" in {node.op_type for node in onnx.load(str(model)).graph.node}
