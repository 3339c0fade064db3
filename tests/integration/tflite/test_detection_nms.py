"""The real detector (MTCNN P-Net with `model.prepost`) through onnx2tf and TFLite: its
NonMaxSuppression on a real photo keeps the boxes ONNX Runtime keeps, in the same
order, and the padding rows (score 0, class -1) stay padding — onnx2tf's default
would pad NMS's indices with index 0, a real box."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from edgebuild.backends.tflite.convert import convert
from edgebuild.backends.tflite.onnx_to_tf import _convert
from edgebuild.backends.tflite.options import TfliteOptions
from edgebuild.backends.tflite.prepare_onnx import channels_last_inputs
from edgebuild.data.loaders import letterbox
from edgebuild.recipe.yaml_loader import load_yaml

pytestmark = [pytest.mark.tflite, pytest.mark.slow]

RECIPES = Path(__file__).resolve().parents[3] / "recipes"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    if importlib.util.find_spec("facenet_pytorch") is None:
        pytest.skip("needs facenet-pytorch (the P-Net weights)")
    skimage = pytest.importorskip("skimage", reason="needs scikit-image (the photo)")
    import onnx
    import torch
    from PIL import Image

    from edgebuild.passes.torch_model import build_torch_model

    out = tmp_path_factory.mktemp("detector-tflite")
    wrapped = build_torch_model(dict(load_yaml(RECIPES / "detector.yaml").data["model"]),
                                RECIPES)
    photo = Path(skimage.__file__).parent / "data" / "astronaut.png"
    image = np.asarray(letterbox(Image.open(photo).convert("RGB"), 128, 128, 114))[None]
    onnx_path = out / "detector.onnx"
    torch.onnx.export(wrapped, (torch.from_numpy(image.copy()),), str(onnx_path),
                      input_names=["image"], output_names=["boxes", "scores", "classes"],
                      opset_version=17, dynamo=False)
    model = onnx.load(str(onnx_path))
    assert channels_last_inputs(model) == ["image"]  # uint8 NHWC in, kept NHWC
    log = _convert(onnx_path, out / "saved_model", keep_nchw=["image"])
    assert (out / "saved_model" / "saved_model.pb").is_file(), log
    tflite = out / "model.tflite"
    tflite.write_bytes(convert(out / "saved_model", TfliteOptions(), None))
    return {"onnx": onnx_path, "tflite": tflite, "image": image}


def test_tflite_nms_equals_onnx_runtime(built: dict[str, Any]) -> None:
    import onnxruntime as ort
    from ai_edge_litert.interpreter import Interpreter

    session = ort.InferenceSession(str(built["onnx"]), providers=["CPUExecutionProvider"])
    boxes, scores, classes = (o[0] for o in session.run(None, {"image": built["image"]}))
    runner = Interpreter(model_path=str(built["tflite"])).get_signature_runner()
    assert runner.get_input_details()["image"]["dtype"] == np.uint8
    got = runner(image=built["image"])
    # onnx2tf names the outputs output_0.. in the ONNX order
    t_boxes, t_scores, t_classes = (got[k][0] for k in sorted(got))
    n = int((scores > 0).sum())
    assert 0 < n < len(scores)  # detections, then padding
    np.testing.assert_allclose(t_scores, scores, atol=1e-4)
    np.testing.assert_allclose(t_boxes, boxes, atol=1e-3)
    np.testing.assert_array_equal(t_classes, classes)
    assert np.all(t_classes[n:] == -1) and np.all(t_scores[n:] == 0)
