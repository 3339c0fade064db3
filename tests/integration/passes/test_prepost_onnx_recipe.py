"""An ONNX-source recipe with `model.prepost` (a YOLOv8-style head exported by
torch.onnx, uint8 photos in) built through the real CLI for ONNX Runtime and OpenVINO:
both pass `task: detection` agreement with the FP32 reference, which is the composed
graph itself in ONNX Runtime."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from tests.conftest import edgebuild

pytest.importorskip("torch", reason="needs torch (to export the head)")
pytest.importorskip("onnxruntime", reason="needs onnxruntime")
pytest.importorskip("skimage", reason="needs scikit-image's photos")

pytestmark = [pytest.mark.onnxruntime, pytest.mark.slow]

RECIPE = """\
name: yolo-onnx
model:
  onnx: head.onnx
  prepost:
    input: {layout: NHWC, scale: 0.00392156862745098}    # 1/255, RGB
    detection: {head: yolov8, score_threshold: 0.6, iou_threshold: 0.45, max_detections: 100}
inputs:
  - {name: image, shape: [1, 320, 320, 3], dtype: uint8}
outputs: [boxes, scores, classes]
datasets:
  photos:
    kind: images
    path: {package: skimage, path: data}
    patterns: [astronaut.png, coffee.png, chelsea.png, rocket.jpg, motorcycle_left.png]
    preprocess: {letterbox: [320, 320], dtype: uint8, layout: NHWC}
targets:
  host-cpu:
    gates: &gates
      accuracy:
        - {dataset: photos, task: detection, boxes: boxes, scores: scores,
           classes: classes, score_threshold: 0.6, min_box_agreement: 99, min_map50: 99}
  intel-cpu:
    gates: *gates
"""

TARGETS = [
    pytest.param("host-cpu", id="host-cpu"),
    pytest.param("intel-cpu", id="intel-cpu", marks=[
        pytest.mark.openvino,
        pytest.mark.skipif(importlib.util.find_spec("openvino") is None,
                           reason="needs openvino")]),
]


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.integration.passes.test_prepost_onnx import exported

    folder = tmp_path_factory.mktemp("recipe")
    _, onnx_path = exported("yolov8", folder)
    onnx_path.rename(folder / "head.onnx")
    (folder / "r.yaml").write_text(RECIPE)
    return folder


@pytest.mark.parametrize("target", TARGETS)
def test_detection_gate_passes_vs_the_composed_fp32(project: Path, target: str,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")  # no vendor telemetry
    out = project / f"out-{target}"
    result = edgebuild("run", str(project / "r.yaml"), "--target", target, "--out", str(out))
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads((out / "report.json").read_text())
    (row,) = report["targets"]
    (gate,) = row["gates"]
    measured = gate["measured"]
    assert gate["status"] == "passed", gate["message"]
    assert measured["box_agreement"] == 100.0 and measured["map50"] == 100.0
    assert measured["reference_boxes"] > 20  # the photos give real detections
