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
