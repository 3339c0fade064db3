"""INT8 calibrated on images that never score above the detector's threshold finds
nothing, and edgebuild says so in one line (issue 40, item 1).

tests/models/yolo_head_gate.py, exported by torch.onnx and composed with `model.prepost`
(uint8 NCHW in, YOLOv8 decode + NMS at `score_threshold` 0.8): its dark photos score
0.757 at most, the bright ones 0.84–0.90. Calibrated on the dark ones, INT8 clips every
score to 0.757 and keeps no box on any image, while main named no cause (the layer
report blamed a prepost node) and the budget tried every lever, then advised adding
`keep_float` to steps that held it. Calibrated on images with confident detections —
the sentence's advice, applied — the same build finds FP32's boxes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from edgebuild.errors import StageError
from edgebuild.passes.quantize import Quantize
from edgebuild.quant.params import QuantizeParams
from tests.conftest import edgebuild, load_module
from tests.integration.passes.conftest import as_artifact, context

torch = pytest.importorskip("torch", reason="the test model is a PyTorch module")
pytest.importorskip("onnxruntime", reason="needs onnxruntime")
pytest.importorskip("onnx_graphsurgeon", reason="model.prepost composes with GraphSurgeon")
pytestmark = pytest.mark.onnxruntime

MODEL = Path(__file__).resolve().parents[2] / "models" / "yolo_head_gate.py"
THRESHOLD = 0.8
DARK, BRIGHT = [0, 1, 2, 3, 5], [4, 6, 7]  # photos() seed 0: max score 0.757 / 0.77–0.90
INPUTS = [{"name": "image", "shape": [1, 3, 320, 320], "dtype": "uint8", "dynamic_axes": {}}]
OUTPUTS = ["boxes", "scores", "classes"]
GATE = {"dataset": "bright", "task": "detection", "boxes": "boxes", "scores": "scores",
        "classes": "classes", "score_threshold": THRESHOLD, "min_box_agreement": 90}


def _module() -> Any:
    return load_module(MODEL)


def _photos() -> np.ndarray:
    return np.asarray((_module().photos(8).numpy() * 255).round().astype(np.uint8))


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The raw head exported, its composed graph, and the dark / bright photo sets."""
    import onnx

    from edgebuild.passes.prepost_onnx import compose
    from edgebuild.recipe.prepost import PrePost

    folder = tmp_path_factory.mktemp("clip")
    torch.onnx.export(_module().build(), (torch.zeros(1, 3, 320, 320),),
                      str(folder / "head.onnx"), input_names=["images"],
                      output_names=["output0"], opset_version=17, dynamo=False)
    spec = PrePost.model_validate({"input": {"layout": "NCHW", "scale": 1 / 255},
                                   "detection": {"head": "yolov8",
                                                 "score_threshold": THRESHOLD}})
    (folder / "composed").mkdir()
    onnx.save(compose(onnx.load(str(folder / "head.onnx")), spec, INPUTS, OUTPUTS),
              str(folder / "composed" / "model.onnx"))
    photos = _photos()
    np.savez(folder / "dark.npz", x=photos[DARK])
    np.savez(folder / "bright.npz", x=photos[BRIGHT])
    recipe = {"model": {"onnx": str(folder / "head.onnx")}, "inputs": INPUTS,
              "outputs": OUTPUTS,
              "datasets": {name: {"kind": "npz", "path": str(folder / f"{name}.npz")}
                           for name in ("dark", "bright")}}
    return {"folder": folder, "recipe": recipe, "photos": photos,
            "model": as_artifact(folder / "composed", "onnx", "model.onnx")}


def quantize(project: dict[str, Any], out: Path, **params: Any) -> tuple[Path, dict[str, Any]]:
    ctx = context(out, {"model": project["model"]}, project["recipe"])
    result = Quantize().run(ctx, QuantizeParams(mode="static", compare_samples=0, **params))
    return out / result.main, result.metadata


def boxes_found(path: Path, images: np.ndarray) -> int:
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return sum(int(np.count_nonzero(session.run(["scores"], {"image": image[None]})[0] > 0))
               for image in images)


def test_calibration_below_the_threshold_is_said_in_one_line_and_is_true(
        tmp_path: Path, project: dict[str, Any]) -> None:
    path, meta = quantize(project, tmp_path / "q", calibration="dark")
    record = meta["score_range"]
    (nms,) = record["nms"]
    assert nms["clipped"] and nms["score_threshold"] == pytest.approx(THRESHOLD)
    assert 0.75 < nms["calibrated_max"] < THRESHOLD, nms
    assert record["warning"].startswith(
        f"calibration never saw a score above {nms['calibrated_max']:.3g}, the detector "
        f"keeps boxes above {THRESHOLD:g}: ")
    assert "calibrate on images with confident detections" in record["warning"]
    # The sentence is true: FP32 finds boxes on the bright photos, this INT8 build none.
    bright = project["photos"][BRIGHT]
    assert boxes_found(project["model"].main, bright) >= 5
    assert boxes_found(path, bright) == 0


def test_calibrating_on_confident_images_recovers_the_boxes(
        tmp_path: Path, project: dict[str, Any]) -> None:
    """The sentence's advice applied: calibration on photos with FP32 detections."""
    path, meta = quantize(project, tmp_path / "q", calibration="bright")
    assert "warning" not in meta["score_range"]
    assert not meta["score_range"]["nms"][0]["clipped"]
    bright = project["photos"][BRIGHT]
    assert boxes_found(path, bright) == boxes_found(project["model"].main, bright)


def test_the_budget_stops_on_clipped_scores_and_its_advice_passes(
        tmp_path: Path, project: dict[str, Any]) -> None:
    """No lever raises a range above what calibration saw: the budget says why after
    one trial (main tried every lever and the keep-float search, then advised adding
    `keep_float`, which the steps held), and names the calibration that passes."""
    with pytest.raises(StageError) as info:
        quantize(project, tmp_path / "q", calibration="dark", budget={"gate": GATE})
    message, hint = info.value.message, info.value.hint
    assert "calibration never saw a score above 0.757, the detector keeps boxes above 0.8" \
        in message, message
    assert "levers were not tried" in message and "keep_float" not in hint
    assert "`calibration: bright` would do" in hint, hint
    _, meta = quantize(project, tmp_path / "q2", calibration="bright", budget={"gate": GATE})
    assert meta["budget"]["chosen"] == "as written", meta["budget"]


RECIPE = """\
name: clipped
model:
  onnx: head.onnx
  prepost:
    input: {{layout: NCHW, scale: 0.00392156862745098}}
    detection: {{head: yolov8, score_threshold: 0.8}}
inputs: [{{name: image, shape: [1, 3, 320, 320], dtype: uint8}}]
outputs: [boxes, scores, classes]
datasets:
  dark: {{kind: npz, path: dark.npz}}
  bright: {{kind: npz, path: bright.npz}}
targets:
  host-cpu-int8:
    profile: host-cpu
    passes: [quantize: {{mode: static, calibration: {calibration}, compare_samples: 2}}]
    gates:
      accuracy: {{dataset: bright, task: detection, boxes: boxes, scores: scores,
                  classes: classes, score_threshold: 0.8, min_box_agreement: 90}}
"""


@pytest.mark.slow
def test_the_gate_and_the_plan_name_the_calibration_not_a_layer(
        tmp_path: Path, project: dict[str, Any]) -> None:
    folder = project["folder"]
    for name in ("head.onnx", "dark.npz", "bright.npz"):
        (tmp_path / name).write_bytes((folder / name).read_bytes())
    recipe, cache = tmp_path / "r.yaml", tmp_path / "cache"
    recipe.write_text(RECIPE.format(calibration="dark"))
    run = edgebuild("run", str(recipe), "--out", str(tmp_path / "out"), "--cache-dir",
                    str(cache))
    assert run.returncode != 0, run.stdout + run.stderr
    (gate,) = json.loads((tmp_path / "out" / "report.json").read_text())["targets"][0]["gates"]
    assert gate["status"] == "failed" and gate["measured"]["box_agreement"] == 0.0
    assert "calibration never saw a score above 0.757, the detector keeps boxes above 0.8" \
        in gate["message"], gate["message"]
    assert "first diverges at" not in gate["message"], "a late node is not the cause"
    plan = edgebuild("plan", str(recipe), "--cache-dir", str(cache))
    assert "warning: quantize (cached): calibration never saw a score above 0.757" \
        in plan.stdout, plan.stdout
    # The advice applied: calibrated on images with confident detections, the gate passes.
    recipe.write_text(RECIPE.format(calibration="bright"))
    run = edgebuild("run", str(recipe), "--out", str(tmp_path / "out2"), "--cache-dir",
                    str(cache))
    assert run.returncode == 0, run.stdout + run.stderr
    assert "warning:" not in edgebuild("plan", str(recipe), "--cache-dir", str(cache)).stdout
