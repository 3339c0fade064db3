"""An ONNX model with dynamic height and width builds for Android: onnx-to-tf pins the
dynamic dimensions to the recipe's declared shape (onnx2tf alone made them 1, giving a
.tflite with input [1, 1, 1, 3] that no real image fitted)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import edgebuild

pytestmark = pytest.mark.tflite

RECIPE = """\
name: dynamic-hw
model: {onnx: heat.onnx}
inputs: [{name: image, shape: [1, 3, 32, 48], dynamic_axes: {2: height, 3: width}}]
outputs: [heat]
datasets:
  crops: {kind: npz, path: crops.npz, arrays: {image: image}}
targets:
  android:
    options: {latency_on: host}
    gates:
      accuracy: {dataset: crops, output: heat, task: dense, max_abs_error: 0.001}
"""


def heat_map_model(path: Path) -> None:
    """A text-detector-like head: conv over an image of any size -> one-channel map."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    weights = rng.standard_normal((1, 3, 3, 3)).astype(np.float32) * 0.3
    graph = helper.make_graph(
        [helper.make_node("Conv", ["image", "W"], ["conv"], pads=[1, 1, 1, 1]),
         helper.make_node("Sigmoid", ["conv"], ["heat"])],
        "heat", [helper.make_tensor_value_info("image", TensorProto.FLOAT,
                                               [1, 3, "height", "width"])],
        [helper.make_tensor_value_info("heat", TensorProto.FLOAT, [1, 1, "height", "width"])],
        [numpy_helper.from_array(weights, "W")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


@pytest.mark.slow
def test_dynamic_height_and_width_are_pinned_to_the_declared_shape(tmp_path: Path) -> None:
    heat_map_model(tmp_path / "heat.onnx")
    crops = np.random.default_rng(1).random((6, 1, 3, 32, 48)).astype(np.float32)
    np.savez(tmp_path / "crops.npz", image=crops.reshape(6, 3, 32, 48))
    (tmp_path / "r.yaml").write_text(RECIPE)
    result = edgebuild("run", str(tmp_path / "r.yaml"), "--out", str(tmp_path / "out"))
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    stages = {s["op"]: s for s in report["stages"]}
    assert stages["onnx-to-tf"]["metadata"]["pinned_inputs"] == {"image": [1, 3, 32, 48]}
    io = stages["compile"]["metadata"]["io"]
    assert io["inputs"][0]["model_shape"] == [1, 32, 48, 3]  # NHWC, never [1, 1, 1, 3]
    accuracy = report["targets"][0]["gates"][0]
    assert accuracy["status"] == "passed" and accuracy["measured"]["samples"] == 6
