"""`model.prepost` composed onto real exported ONNX graphs (passes/prepost_onnx.py): a
YOLOv8-style head `[1, 4 + C, N]` (pixels, centre/size) and a YOLOv5-style head
`[1, N, 5 + C]` (objectness, boxes as fractions), each exported by torch.onnx, given
uint8 letterboxed photos; the detections equal a NumPy decode + NMS of the same run's
raw head, and the PyTorch wrapper (`prepost_torch.py`) of the same declaration."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("torch", reason="needs torch")
pytest.importorskip("onnxruntime", reason="needs onnxruntime")
pytest.importorskip("onnx_graphsurgeon", reason="needs onnx-graphsurgeon")
pytest.importorskip("skimage", reason="needs scikit-image's photos")

import torch

from edgebuild.data.loaders import letterbox
from edgebuild.recipe.prepost import PrePost

pytestmark = [pytest.mark.onnxruntime]

MODELS = Path(__file__).resolve().parents[2] / "models"
PHOTOS = ("astronaut.png", "coffee.png", "chelsea.png", "rocket.jpg", "motorcycle_left.png")
SIZE = 320
INPUT = [{"name": "image", "shape": [1, SIZE, SIZE, 3], "dtype": "uint8", "dynamic_axes": {}}]
OUTPUTS = ["boxes", "scores", "classes"]
# head -> (module in tests/models, the declaration's detection part)
LAYOUTS: dict[str, tuple[str, dict[str, Any]]] = {
    "yolov8": ("yolo_head", {"head": "yolov8", "score_threshold": 0.6, "iou_threshold": 0.45,
                             "max_detections": 100}),
    "yolov5": ("yolov5_head", {"head": "yolov5", "normalized": True, "score_threshold": 0.45,
                               "iou_threshold": 0.5, "max_detections": 100}),
}


def numpy_decode(head: np.ndarray, layout: str, normalized: bool) -> tuple[np.ndarray, ...]:
    """Boxes (x1, y1, x2, y2, pixels), best score and its class per row, from a raw head
    of batch 1, written independently of edgebuild."""
    if layout == "yolov8":
        rows = head[0].T  # [N, 4 + C]
        xywh, scores = rows[:, :4], rows[:, 4:]
    else:
        rows = head[0]  # [N, 5 + C]
        xywh, scores = rows[:, :4], rows[:, 4:5] * rows[:, 5:]
    if normalized:
        xywh = xywh * SIZE
    boxes = np.concatenate([xywh[:, :2] - xywh[:, 2:] / 2, xywh[:, :2] + xywh[:, 2:] / 2], 1)
    return boxes, scores.max(1), scores.argmax(1)


def numpy_nms(boxes: np.ndarray, scores: np.ndarray, classes: np.ndarray, iou: float,
              threshold: float, limit: int) -> list[int]:
    """Greedy per-class NMS (boxes of different classes never suppress each other)."""
    order = [int(i) for i in np.argsort(-scores, kind="stable") if scores[i] > threshold]
    keep: list[int] = []
    for i in order:
        if len(keep) == limit:
            break
        suppressed = False
        for j in keep:
            if classes[i] != classes[j]:
                continue
            w = max(0.0, min(boxes[i, 2], boxes[j, 2]) - max(boxes[i, 0], boxes[j, 0]))
            h = max(0.0, min(boxes[i, 3], boxes[j, 3]) - max(boxes[i, 1], boxes[j, 1]))
            inter = w * h
            union = ((boxes[i, 2] - boxes[i, 0]) * (boxes[i, 3] - boxes[i, 1])
                     + (boxes[j, 2] - boxes[j, 0]) * (boxes[j, 3] - boxes[j, 1]) - inter)
            if union > 0 and inter / union > iou:
                suppressed = True
                break
        if not suppressed:
            keep.append(i)
    return keep


def photos() -> np.ndarray:
    import skimage
    from PIL import Image

    data = Path(skimage.__file__).parent / "data"
    return np.stack([np.asarray(letterbox(Image.open(data / p).convert("RGB"), SIZE, SIZE,
                                          114)) for p in PHOTOS])


def exported(layout: str, folder: Path) -> tuple[torch.nn.Module, Path]:
    """The layout's torch model and its ONNX export (legacy exporter, opset 17)."""
    sys.path.insert(0, str(MODELS))
    try:
        module = __import__(LAYOUTS[layout][0])
    finally:
        sys.path.remove(str(MODELS))
    model = module.build()
    path = folder / f"{layout}.onnx"
    torch.onnx.export(model, (torch.zeros(1, 3, SIZE, SIZE),), str(path),
                      input_names=["images"], output_names=["output0"], opset_version=17,
                      dynamo=False)
    return model, path


def spec(layout: str) -> PrePost:
    return PrePost.model_validate({"input": {"layout": "NHWC", "scale": 1 / 255},
                                   "detection": LAYOUTS[layout][1]})


@pytest.fixture(scope="module", params=sorted(LAYOUTS))
def composed(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
             ) -> dict[str, Any]:
    import onnx
    import onnx_graphsurgeon as gs

    from edgebuild.passes.prepost_onnx import compose

    layout = request.param
    folder = tmp_path_factory.mktemp(layout)
    model, path = exported(layout, folder)
    result = compose(onnx.load(str(path)), spec(layout), INPUT, OUTPUTS)
    deployed = folder / "composed.onnx"
    onnx.save(result, str(deployed))
    # The same graph with the raw head as a fourth output: the NumPy reference decodes
    # exactly the values the composed NMS saw (no dependence on float summation order).
    graph = gs.import_onnx(result)
    graph.outputs.append(graph.tensors()["output0"].to_variable(dtype=np.float32))
    probe = folder / "probe.onnx"
    onnx.save(gs.export_onnx(graph), str(probe))
    return {"layout": layout, "model": model, "deployed": deployed, "probe": probe,
            "detection": LAYOUTS[layout][1]}


def test_composed_graph_is_uint8_in_detections_out(composed: dict[str, Any]) -> None:
    import onnx

    model = onnx.load(str(composed["deployed"]))
    ops = [n.op_type for n in model.graph.node]
    assert ops.count("NonMaxSuppression") == 1 and "Cast" in ops
    assert [i.name for i in model.graph.input] == ["image"]
    assert model.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.UINT8
    assert [o.name for o in model.graph.output] == OUTPUTS
    assert not any(i.name.startswith("prepost") for i in model.graph.input)
    assert all(n.name.startswith("prepost/") for n in model.graph.node
               if n.op_type == "NonMaxSuppression")


def test_detections_equal_numpy_decode_and_nms(composed: dict[str, Any]) -> None:
    import onnxruntime as ort

    from edgebuild.fidelity.detection import iou_matrix

    det = composed["detection"]
    session = ort.InferenceSession(str(composed["probe"]), providers=["CPUExecutionProvider"])
    found = 0
    for image in photos():
        boxes, scores, classes, head = session.run(None, {"image": image[None]})
        ref_boxes, ref_scores, ref_classes = numpy_decode(head, composed["layout"],
                                                          det.get("normalized", False))
        keep = numpy_nms(ref_boxes, ref_scores, ref_classes, det["iou_threshold"],
                         det["score_threshold"], det["max_detections"])
        n = len(keep)
        assert int((scores[0] > 0).sum()) == n  # same count, then padding
        assert np.all(classes[0, n:] == -1) and np.all(scores[0, n:] == 0)
        if n:
            iou = iou_matrix(boxes[0, :n].astype(np.float64), ref_boxes[keep].astype(np.float64))
            assert np.all(np.diag(iou) >= 0.99), np.diag(iou).min()
            np.testing.assert_allclose(scores[0, :n], ref_scores[keep], rtol=1e-5, atol=1e-6)
            assert np.array_equal(classes[0, :n], ref_classes[keep])
        found += n
    assert found > 5  # the photos give real detections


def test_torch_wrapper_of_the_same_declaration_agrees(composed: dict[str, Any]) -> None:
    """The PyTorch wrapper takes the same head layouts: same boxes, matched by IoU."""
    import onnxruntime as ort

    from edgebuild.fidelity.detection import iou_matrix
    from edgebuild.frontend.prepost_torch import wrap

    wrapped = wrap(composed["model"], spec(composed["layout"]))
    session = ort.InferenceSession(str(composed["deployed"]),
                                   providers=["CPUExecutionProvider"])
    for image in photos()[:3]:
        boxes, scores, _ = session.run(None, {"image": image[None]})
        with torch.no_grad():
            t_boxes, t_scores, _ = (t.numpy() for t in wrapped(torch.from_numpy(image[None])))
        n, m = int((scores[0] > 0).sum()), int((t_scores[0] > 0).sum())
        assert abs(n - m) <= 1  # a score exactly at the threshold may round either way
        iou = iou_matrix(boxes[0, :n].astype(np.float64), t_boxes[0, :m].astype(np.float64))
        if n and m:
            assert (iou.max(1) >= 0.99).mean() >= 0.95
