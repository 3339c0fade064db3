"""The committed Ultralytics export (recipes/models/yolo_shapes, static [1, 3, 256, 256])
with `model.prepost` through onnx2tf and TFLite, as `onnx-to-tf` converts it: a model
with nothing to pin is constant-folded too (unfolded, onnx2tf failed on the decode's
`/model.22/Mul_2`), and the TFLite detections equal ONNX Runtime's on val scenes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from edgebuild.backends.tflite.convert import convert
from edgebuild.backends.tflite.onnx_to_tf import _convert
from edgebuild.backends.tflite.options import TfliteOptions
from edgebuild.backends.tflite.prepare_onnx import channels_last_inputs

pytest.importorskip("onnx_graphsurgeon", reason="needs onnx-graphsurgeon")

pytestmark = [pytest.mark.tflite, pytest.mark.slow]

RECIPES = Path(__file__).resolve().parents[3] / "recipes"
SIZE = 256


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    import onnx
    from PIL import Image

    from edgebuild.data.loaders import letterbox
    from edgebuild.passes.prepost_onnx import compose
    from edgebuild.recipe.prepost import PrePost

    out = tmp_path_factory.mktemp("yolo-tflite")
    spec = PrePost.model_validate({
        "input": {"layout": "NHWC", "scale": 1 / 255},
        "detection": {"head": "yolov8", "score_threshold": 0.1, "iou_threshold": 0.45,
                      "max_detections": 100}})
    inputs = [{"name": "image", "shape": [1, SIZE, SIZE, 3], "dtype": "uint8",
               "dynamic_axes": {}}]
    model = compose(onnx.load(str(RECIPES / "models" / "yolo_shapes" / "yolov8_shapes.onnx")),
                    spec, inputs, ["boxes", "scores", "classes"])
    onnx_path = out / "yolo.onnx"
    onnx.save(model, str(onnx_path))
    assert channels_last_inputs(model) == ["image"]
    # What the stage passes for a static model: nothing to pin ({}), still folded.
    log = _convert(onnx_path, out / "saved_model", keep_nchw=["image"], pinned={})
    assert (out / "saved_model" / "saved_model.pb").is_file(), log
    tflite = out / "model.tflite"
    tflite.write_bytes(convert(out / "saved_model", TfliteOptions(), None))
    files = sorted((RECIPES / "data" / "yolo-shapes" / "images").glob("*.jpg"))[:4]
    images = [np.asarray(letterbox(Image.open(f).convert("RGB"), SIZE, SIZE, 114))[None]
              for f in files]
    return {"onnx": onnx_path, "tflite": tflite, "images": images}


def test_tflite_detections_equal_onnx_runtime(built: dict[str, Any]) -> None:
    import onnxruntime as ort
    from ai_edge_litert.interpreter import Interpreter

    from edgebuild.fidelity.detection import iou_matrix

    session = ort.InferenceSession(str(built["onnx"]), providers=["CPUExecutionProvider"])
    runner = Interpreter(model_path=str(built["tflite"])).get_signature_runner()
    found = 0
    for image in built["images"]:
        boxes, scores, classes = (o[0] for o in session.run(None, {"image": image}))
        got = runner(image=image)
        t_boxes, t_scores, t_classes = (got[k][0] for k in sorted(got))  # ONNX order
        n = int((scores > 0).sum())
        assert int((t_scores > 0).sum()) == n
        if n:
            iou = iou_matrix(t_boxes[:n].astype(np.float64), boxes[:n].astype(np.float64))
            assert np.all(np.diag(iou) >= 0.99), np.diag(iou).min()
            np.testing.assert_allclose(t_scores[:n], scores[:n], atol=1e-3)
            np.testing.assert_array_equal(t_classes[:n], classes[:n])
        found += n
    assert found > 0
