"""Export of a CRNN-style extractor with a dynamic width (issue 30): the legacy
exporter's adaptive-pooling failure gets a hint, and dynamo traces the declared width
(tracing at 2 failed: the valid convolution needs 5), with no terminal colours.

With an LSTM after the pooling, as EasyOCR's recognizer has (issue 40): dynamo fixes the
LSTM's length and a Reshape after it holds the example width, so the export is checked at
twice the width and fails there, naming the axis; the adaptive-pooling hint then offers
only the mean, and the mean exports a model that takes any width."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from edgebuild.errors import StageError
from edgebuild.execute.worker import context_from_recipe
from edgebuild.passes.export_onnx import ExportOnnx, ExportParams
from tests.conftest import REPO, edgebuild

pytest.importorskip("torch")
pytest.importorskip("onnxruntime")
pytestmark = pytest.mark.onnxruntime

RECIPE = f"""\
name: width-pool
model: {{factory: "{REPO / 'tests' / 'models' / 'width_pool.py'}:build"}}
inputs: [{{name: x, shape: [1, 1, 8, 32], dynamic_axes: {{3: width}}}}]
outputs: [features]
passes: [export-onnx: {{opset: 18, exporter: EXPORTER}}]
targets:
  host-cpu:
    gates: {{size: {{max_mb: 1}}}}
"""


def run(tmp_path: Path, exporter: str) -> tuple[int, str]:
    recipe = tmp_path / f"{exporter}.yaml"
    recipe.write_text(RECIPE.replace("EXPORTER", exporter))
    result = edgebuild("run", str(recipe), "--out", str(tmp_path / exporter))
    return result.returncode, result.stdout + result.stderr


@pytest.mark.slow
def test_adaptive_pooling_over_a_dynamic_width(tmp_path: Path) -> None:
    code, text = run(tmp_path, "legacy")
    assert code != 0 and "adaptive pooling" in text
    assert "mean over that axis" in text and "exporter: dynamo" in text
    assert "Traceback" not in text and "\x1b[" not in text
    code, text = run(tmp_path, "dynamo")
    assert code == 0, text


def export(tmp_path: Path, factory: str, **params: Any) -> Any:
    """export-onnx run directly on a width_pool.py factory, the width dynamic."""
    recipe = {"model": {"factory": f"{REPO / 'tests' / 'models' / 'width_pool.py'}:{factory}"},
              "inputs": [{"name": "x", "shape": [1, 1, 8, 32], "dtype": "float32",
                          "dynamic_axes": {"3": "width"}}],
              "outputs": ["features"]}
    out = tmp_path / f"{factory}-{params.get('exporter', 'legacy')}"
    out.mkdir()
    ctx = context_from_recipe("export-onnx", {}, out, recipe, tmp_path)
    result = ExportOnnx().run(ctx, ExportParams(opset=18, **params))
    return out / result.main, result.metadata


def test_dynamo_fixing_an_lstm_width_fails_the_export_naming_the_axis(tmp_path: Path) -> None:
    with pytest.raises(StageError) as raised:
        export(tmp_path, "build_lstm", exporter="dynamo")
    error = raised.value
    assert "does not take the dynamic axes at other sizes (x: width = 64" in error.message
    assert "Reshape" in error.message  # ONNX Runtime's words, first line
    assert "fixes the sequence length of rnn" in (error.hint or "")
    assert "`exporter: legacy`" in (error.hint or "")


def test_pooling_hint_for_an_lstm_model_is_the_mean_and_the_mean_exports(
        tmp_path: Path) -> None:
    import numpy as np
    import onnxruntime as ort

    with pytest.raises(StageError) as raised:
        export(tmp_path, "build_lstm")
    assert "adaptive pooling" in raised.value.message
    hint = raised.value.hint or ""
    assert "mean over that axis" in hint and "dynamo" not in hint
    # The hint applied: the same model pooling with a mean, the legacy exporter.
    path, metadata = export(tmp_path, "build_lstm_mean")
    assert metadata["check"]["dynamic_axes"]["shapes"] == {"x": [1, 1, 8, 64]}
    assert metadata["check"]["dynamic_axes"]["max_abs_diff"] < 1e-4
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    x = np.zeros((1, 1, 8, 512), np.float32)
    assert session.run(None, {"x": x})[0].shape == (1, 508, 5)
