"""Label-file mistakes through the real CLI: the documented exit code 2 (invalid data),
one message naming the file and key, no traceback, never a failed gate (exit 1)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.conftest import edgebuild

pytest.importorskip("onnxruntime", reason="the ONNX Runtime backend needs onnxruntime")
pytestmark = pytest.mark.onnxruntime

RECIPE = """\
name: boxes
model: {onnx: boxes.onnx}
inputs: [{name: x, shape: [1, 8, 8, 3], dtype: uint8}]
outputs: [boxes, scores]
datasets:
  photos:
    kind: images
    path: images
    labels: {format: LABELS}
    preprocess: {letterbox: [8, 8], dtype: uint8, layout: NHWC}
targets:
  host-cpu:
    gates:
      accuracy: {dataset: photos, task: detection, boxes: boxes, scores: scores,
                 min_map50: 50, min_map50_labels: 10}
"""


def project(tmp_path: Path, labels: str) -> Path:
    """A constant two-box detector (its input only multiplied by 0) and two photos."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from PIL import Image

    boxes = np.array([[[0, 0, 4, 4], [2, 2, 8, 8]]], dtype=np.float32)
    scores = np.array([[0.9, 0.8]], dtype=np.float32)
    graph = helper.make_graph([
        helper.make_node("Cast", ["x"], ["xf"], to=TensorProto.FLOAT),
        helper.make_node("ReduceMean", ["xf"], ["m"], keepdims=0),
        helper.make_node("Mul", ["m", "zero"], ["z"]),
        helper.make_node("Add", ["B", "z"], ["boxes"]),
        helper.make_node("Add", ["S", "z"], ["scores"])], "boxes",
        [helper.make_tensor_value_info("x", TensorProto.UINT8, [1, 8, 8, 3])],
        [helper.make_tensor_value_info("boxes", TensorProto.FLOAT, [1, 2, 4]),
         helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, 2])],
        [numpy_helper.from_array(boxes, "B"), numpy_helper.from_array(scores, "S"),
         numpy_helper.from_array(np.array(0.0, dtype=np.float32), "zero")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(tmp_path / "boxes.onnx"))
    (tmp_path / "images").mkdir()
    for name in ("a.png", "b.png"):
        Image.new("RGB", (8, 8), (90, 120, 150)).save(tmp_path / "images" / name)
    path = tmp_path / "r.yaml"
    path.write_text(RECIPE.replace("LABELS", labels))
    return path


@pytest.mark.slow
def test_labels_without_a_box_exit_2_not_as_a_failed_gate(tmp_path: Path) -> None:
    path = project(tmp_path, "yolo, path: labels")
    (tmp_path / "labels").mkdir()
    (tmp_path / "labels" / "a.txt").write_text("# no objects\n")
    (tmp_path / "labels" / "b.txt").write_text("")
    run = edgebuild("run", str(path), "--out", str(tmp_path / "out"), cwd=tmp_path)
    output = run.stdout + run.stderr
    assert run.returncode == 2, output
    assert "labels hold no box on any of its 2 images" in output and "labels.path" in output
    assert "Traceback" not in output


@pytest.mark.slow
def test_a_nan_box_in_a_coco_file_is_named(tmp_path: Path) -> None:
    path = project(tmp_path, "coco, path: instances.json")
    (tmp_path / "instances.json").write_text(
        '{"images": [{"id": 1, "file_name": "a.png"}], "categories": [{"id": 1}], '
        '"annotations": [{"image_id": 1, "category_id": 1, "bbox": [NaN, 0, 4, 4]}]}')
    run = edgebuild("run", str(path), "--out", str(tmp_path / "out"), cwd=tmp_path)
    output = run.stdout + run.stderr
    assert run.returncode != 0 and run.returncode != 1, output  # never a gate verdict
    assert "instances.json: annotations[0].bbox[0] nan: Input should be a finite number" \
        in output
    assert "Traceback" not in output
