"""Export of a CRNN-style extractor with a dynamic width (issue 30): the legacy
exporter's adaptive-pooling failure gets a hint, and dynamo traces the declared width
(tracing at 2 failed: the valid convolution needs 5), with no terminal colours."""

from __future__ import annotations

from pathlib import Path

import pytest

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
