"""Accuracy gates per output, each with the metrics its task means, through the real CLI:
a model with class scores and box regressions, like a detector's two heads."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import edgebuild

pytest.importorskip("onnxruntime", reason="the ONNX Runtime backend needs onnxruntime")
pytestmark = pytest.mark.onnxruntime

RECIPE = """\
name: two-heads
model: {onnx: heads.onnx}
inputs: [{name: x, shape: [1, 4]}]
outputs: [logits, boxes]
datasets:
  samples: {kind: npz, path: samples.npz, labels: y}
passes: [{quantize: {mode: fp16}}]
targets:
  host-cpu:
    gates:
      accuracy:
        - {dataset: samples, output: logits, min_top1_agreement: 99}
        - {dataset: samples, output: BOXES, task: regression, max_relative_error: 0.01,
           min_cosine: 0.999}
"""


def two_heads(path: Path) -> None:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["logits"]),
         helper.make_node("MatMul", ["x", "B"], ["boxes"])],
        "heads", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 3]),
         helper.make_tensor_value_info("boxes", TensorProto.FLOAT, [1, 4])],
        [numpy_helper.from_array(rng.standard_normal((4, 3)).astype(np.float32), "W"),
         numpy_helper.from_array(rng.standard_normal((4, 4)).astype(np.float32) * 50, "B")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))


@pytest.fixture
def project(tmp_path: Path) -> Path:
    two_heads(tmp_path / "heads.onnx")
    rng = np.random.default_rng(1)
    np.savez(tmp_path / "samples.npz", x=rng.standard_normal((32, 4)).astype(np.float32),
             y=rng.integers(0, 3, 32))
    return tmp_path


@pytest.mark.slow
def test_each_output_has_its_own_gate(project: Path) -> None:
    recipe = project / "r.yaml"
    recipe.write_text(RECIPE.replace("BOXES", "boxes"))
    result = edgebuild("run", str(recipe), "--out", str(project / "out"))
    assert result.returncode == 0, result.stdout + result.stderr
    gates = {g["gate"]: g for t in json.loads((project / "out" / "report.json").read_text())
             ["targets"] for g in t["gates"]}
    assert set(gates) == {"accuracy[logits]", "accuracy[boxes]"}
    assert gates["accuracy[logits]"]["measured"]["top1_agreement"] == 100.0
    boxes = gates["accuracy[boxes]"]["measured"]
    assert "top1_agreement" not in boxes and "top5" not in boxes  # not class scores
    assert 0 < boxes["relative_error"] < 0.01  # fp16 of values ~100: a real, small error
    assert "(output 'boxes')" in gates["accuracy[boxes]"]["message"]


def test_an_unknown_output_is_named_at_its_line(project: Path) -> None:
    recipe = project / "r.yaml"
    recipe.write_text(RECIPE.replace("BOXES", "box"))
    result = edgebuild("validate", str(recipe))
    assert result.returncode == 2
    assert f"{recipe}:13:" in result.stderr and "no model output named 'box'" in result.stderr
    assert "did you mean 'boxes'?" in result.stderr
