"""A uint8 image input on the HTP at fp16 (the x86 emulator): the committed YOLO export
with `model.prepost` (input Cast uint8 -> float in front) loses the image unless the
Cast becomes a DequantizeLinear (backends/qnn/inputs.py); with it, the detections are
FP32's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnx_graphsurgeon", reason="needs onnx-graphsurgeon")

pytestmark = [pytest.mark.qnn, pytest.mark.slow]

RECIPES = Path(__file__).resolve().parents[3] / "recipes"
FP16 = {"soc_model": "43", "htp_arch": "73", "htp_performance_mode": "burst",
        "enable_htp_fp16_precision": "1"}


def test_dequantized_input_keeps_the_image_at_fp16(tmp_path: Path) -> None:
    import onnx
    import onnxruntime as ort
    from PIL import Image

    from edgebuild.backends.qnn.inputs import dequantize_cast_inputs
    from edgebuild.backends.qnn.session import session
    from edgebuild.data.loaders import letterbox
    from edgebuild.fidelity.detection import iou_matrix
    from edgebuild.passes.prepost_onnx import compose
    from edgebuild.recipe.prepost import PrePost

    spec = PrePost.model_validate({
        "input": {"layout": "NHWC", "scale": 1 / 255},
        "detection": {"head": "yolov8", "score_threshold": 0.1, "iou_threshold": 0.45,
                      "max_detections": 100}})
    model = onnx.load(str(RECIPES / "models" / "yolo_shapes" / "yolov8_shapes.onnx"))
    del model.metadata_props[:]
    inputs = [{"name": "image", "shape": [1, 256, 256, 3], "dtype": "uint8",
               "dynamic_axes": {}}]
    composed = tmp_path / "composed.onnx"
    onnx.save(compose(model, spec, inputs, ["boxes", "scores", "classes"]), str(composed))
    fixed = tmp_path / "fixed.onnx"
    assert dequantize_cast_inputs(composed, fixed) == ["image"]
    assert onnx.load(str(fixed)).graph.node[0].op_type == "DequantizeLinear"
    photo = RECIPES / "data" / "yolo-shapes" / "images" / "val_00000.jpg"
    image = np.asarray(letterbox(Image.open(photo).convert("RGB"), 256, 256, 114))[None]
    cpu = ort.InferenceSession(str(composed), providers=["CPUExecutionProvider"])
    boxes, scores, classes = (o[0] for o in cpu.run(None, {"image": image}))
    n = int((scores > 0).sum())
    assert n > 0
    htp = session(fixed, FP16, cpu_fallback=True)
    h_boxes, h_scores, h_classes = (o[0] for o in htp.run(None, {"image": image}))
    m = int((h_scores > 0).sum())
    assert abs(m - n) <= 1  # a score at the threshold may round either way at fp16
    iou = iou_matrix(h_boxes[:m].astype(np.float64), boxes[:n].astype(np.float64))
    assert (iou.max(0) >= 0.9).mean() >= 0.85  # FP32's boxes found again
    assert abs(float(h_scores[0]) - float(scores[0])) < 0.03
    assert h_classes[0] == classes[0]
