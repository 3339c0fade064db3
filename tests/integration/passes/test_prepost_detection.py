"""model.prepost on the real detector (MTCNN P-Net, facenet-pytorch's weights): the
exported graph's NonMaxSuppression, run by ONNX Runtime and OpenVINO on a real photo,
keeps exactly the boxes a NumPy NMS keeps from the same raw boxes and scores."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("torch", reason="needs torch")
pytest.importorskip("onnxruntime", reason="needs onnxruntime")
if importlib.util.find_spec("facenet_pytorch") is None:  # its __init__ needs torchvision:
    pytest.skip("needs facenet-pytorch (the P-Net weights)", allow_module_level=True)

import torch

from edgebuild.data.loaders import letterbox
from edgebuild.passes.torch_model import build_torch_model
from edgebuild.recipe.yaml_loader import load_yaml

pytestmark = [pytest.mark.onnxruntime, pytest.mark.slow]

RECIPES = Path(__file__).resolve().parents[3] / "recipes"


def numpy_nms(boxes: np.ndarray, scores: np.ndarray, iou: float, threshold: float,
              limit: int) -> list[int]:
    """Greedy NMS written independently of edgebuild's, in NumPy."""
    order = [int(i) for i in np.argsort(-scores, kind="stable") if scores[i] > threshold]
    keep: list[int] = []
    for i in order:
        if len(keep) == limit:
            break
        ok = True
        for j in keep:
            w = max(0.0, min(boxes[i, 2], boxes[j, 2]) - max(boxes[i, 0], boxes[j, 0]))
            h = max(0.0, min(boxes[i, 3], boxes[j, 3]) - max(boxes[i, 1], boxes[j, 1]))
            inter = w * h
            union = ((boxes[i, 2] - boxes[i, 0]) * (boxes[i, 3] - boxes[i, 1])
                     + (boxes[j, 2] - boxes[j, 0]) * (boxes[j, 3] - boxes[j, 1]) - inter)
            if union > 0 and inter / union > iou:
                ok = False
                break
        if ok:
            keep.append(i)
    return keep


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    import skimage
    from PIL import Image

    recipe = load_yaml(RECIPES / "detector.yaml").data
    source = dict(recipe["model"])
    wrapped = build_torch_model(source, RECIPES)
    bare = build_torch_model({k: v for k, v in source.items() if k != "prepost"}, RECIPES)
    photo = Path(skimage.__file__).parent / "data" / "astronaut.png"
    image = np.asarray(letterbox(Image.open(photo).convert("RGB"), 128, 128, 114))[None]
    onnx_path = tmp_path_factory.mktemp("prepost") / "detector.onnx"
    torch.onnx.export(wrapped, (torch.from_numpy(image.copy()),), str(onnx_path),
                      input_names=["image"], output_names=["boxes", "scores", "classes"],
                      opset_version=17, dynamo=False)
    # The reference: the bare model's raw boxes and scores, normalised by hand.
    x = (torch.from_numpy(image.astype(np.float32)).permute(0, 3, 1, 2) - 127.5) / 128
    with torch.no_grad():
        raw_boxes, raw_scores = (t.numpy()[0] for t in bare(x))
    detection = source["prepost"]["detection"]
    keep = numpy_nms(raw_boxes, raw_scores[:, 0], detection["iou_threshold"],
                     detection["score_threshold"], detection["max_detections"])
    return {"onnx": onnx_path, "image": image, "boxes": raw_boxes[keep],
            "scores": raw_scores[keep, 0], "limit": detection["max_detections"]}


def check(outputs: list[np.ndarray], setup: dict[str, Any]) -> None:
    boxes, scores, classes = (np.asarray(o)[0] for o in outputs)
    n = len(setup["scores"])
    assert 0 < n < setup["limit"]  # a real photo gives detections, and padding follows
    assert boxes.shape == (setup["limit"], 4)
    np.testing.assert_allclose(scores[:n], setup["scores"], atol=1e-4)
    np.testing.assert_allclose(boxes[:n], setup["boxes"], atol=1e-3)
    assert np.all(classes[:n] == 0) and np.all(classes[n:] == -1) and np.all(scores[n:] == 0)


def test_onnx_runtime_nms_equals_numpy(setup: dict[str, Any]) -> None:
    import onnx
    import onnxruntime as ort

    model = onnx.load(str(setup["onnx"]))
    assert "NonMaxSuppression" in {n.op_type for n in model.graph.node}
    assert model.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.UINT8
    session = ort.InferenceSession(str(setup["onnx"]), providers=["CPUExecutionProvider"])
    check(session.run(None, {"image": setup["image"]}), setup)


@pytest.mark.openvino
def test_openvino_nms_equals_numpy(setup: dict[str, Any]) -> None:
    ov = pytest.importorskip("openvino", reason="needs openvino")
    compiled = ov.Core().compile_model(str(setup["onnx"]), "CPU",
                                       {"INFERENCE_PRECISION_HINT": "f32"})
    result = compiled({"image": setup["image"]})
    check([result[o] for o in compiled.outputs], setup)


@pytest.mark.parametrize("method", ["entropy", "percentile"])
def test_histogram_calibration_of_a_graph_with_nms(setup: dict[str, Any], tmp_path: Path,
                                                   method: str) -> None:
    """ONNX Runtime's histogram calibrators stack each tensor over the calibration samples,
    which failed ("inhomogeneous shape") once NMS kept a different number of boxes per
    image. Calibrated one sample at a time, the quantized detector still finds the face."""
    import onnx
    import onnxruntime as ort
    import skimage
    from PIL import Image

    from edgebuild.data.loaders import Samples
    from edgebuild.fidelity.detection import iou_matrix
    from edgebuild.quant.engine import quantize
    from edgebuild.quant.params import QuantizeParams

    data = Path(skimage.__file__).parent / "data"
    photos = [np.asarray(letterbox(Image.open(data / name).convert("RGB"), 128, 128, 114))
              for name in ("astronaut.png", "camera.png", "coffee.png")]
    blank = np.full((128, 128, 3), 114, np.uint8)  # no detections at all: empty tensors
    samples = Samples({"image": np.stack([*photos, blank])}, None, ["a", "b", "c", "blank"])
    p = QuantizeParams(mode="static", calibration="c", method=method)
    quantized = tmp_path / f"{method}.onnx"
    quantize(setup["onnx"], quantized, p, samples, [], tmp_path)

    ops = {n.op_type for n in onnx.load(str(quantized)).graph.node}
    assert {"QuantizeLinear", "NonMaxSuppression"} <= ops
    # Every Q/DQ computed as written (in float): ORT's fused int8 kernels saturate u8s8
    # products on CPUs without VNNI, which moved the box on an AVX2 EPYC and not elsewhere.
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(str(quantized), options, providers=["CPUExecutionProvider"])
    boxes, scores, _ = (np.asarray(o)[0] for o in session.run(None, {"image": setup["image"]}))
    overlap = iou_matrix(boxes[:1], setup["boxes"][:1])[0, 0]
    assert scores[0] > 0 and overlap > 0.5, (boxes[0], setup["boxes"][0])


def test_calibration_without_a_single_detection_says_so(setup: dict[str, Any],
                                                        tmp_path: Path) -> None:
    from edgebuild.data.loaders import Samples
    from edgebuild.errors import StageError
    from edgebuild.quant.engine import quantize
    from edgebuild.quant.params import QuantizeParams

    blank = np.full((2, 128, 128, 3), 114, np.uint8)  # NMS keeps nothing on either
    p = QuantizeParams(mode="static", calibration="c", method="entropy")
    with pytest.raises(StageError) as raised:
        quantize(setup["onnx"], tmp_path / "q.onnx", p,
                      Samples({"image": blank}, None, ["a", "b"]), [], tmp_path)
    assert "empty on every calibration sample" in str(raised.value.hint)
