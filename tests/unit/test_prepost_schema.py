"""`model.prepost` declarations: head layouts for any source, mistakes at file:line, and
the stage an ONNX source gets (its reference and its targets start from the composition)."""

from __future__ import annotations

from pathlib import Path

import pytest

from edgebuild.errors import RecipeError
from edgebuild.plan.planner import build_plan
from edgebuild.recipe.loader import load_recipe
from edgebuild.recipe.prepost import DetectionPost, Head

RECIPE = """\
name: yolo
model:
  onnx: m.onnx
  prepost:
    input: {layout: NCHW, scale: 0.00392156862745098}
    detection: {DETECTION}
inputs:
  - {name: image, shape: [1, 3, 320, 320], dtype: uint8}
outputs: [boxes, scores, classes]
datasets:
  photos: {kind: npz, path: d.npz}
targets:
  host-cpu:
    gates:
      accuracy: {dataset: photos, task: detection, boxes: boxes, scores: scores,
                 classes: classes, min_box_agreement: 99}
"""


def write(tmp_path: Path, detection: str) -> Path:
    path = tmp_path / "r.yaml"
    path.write_text(RECIPE.replace("{DETECTION}", detection))
    return path


def problems_of(path: Path) -> list[str]:
    with pytest.raises(RecipeError) as info:
        load_recipe(path)
    return [str(p) for p in info.value.problems]


def test_an_onnx_source_gets_the_composition_before_reference_and_targets(
        tmp_path: Path) -> None:
    loaded = load_recipe(write(tmp_path, "{head: yolov8, score_threshold: 0.5}"))
    plan = build_plan(loaded)
    stages = {s.id: s for s in plan.order()}
    assert stages["prepost-onnx"].inputs == (("model", "import-onnx"),)
    assert stages["prepost-onnx"].uses_source  # the declaration is in its key
    users = {sid for sid, s in stages.items() if ("model", "prepost-onnx") in s.inputs}
    assert users == {"compile@host-cpu", "reference"}


def test_head_defaults() -> None:
    v8 = DetectionPost.model_validate({"head": "yolov8"})
    assert v8.model_outputs == (0,) and not v8.corners and not v8.normalized
    assert DetectionPost.model_validate({"head": "yolov5", "output": 2}).model_outputs == (2,)
    today = DetectionPost.model_validate({})  # recipes written before head layouts
    assert today.head is Head.BOXES_SCORES and today.model_outputs == (0, 1) and today.corners
    assert DetectionPost.model_validate({"head": "yolov8", "box_format": "xyxy"}).corners
    # A dumped declaration (what a stage gets) reads back the same.
    again = DetectionPost.model_validate(v8.model_dump(mode="json"))
    assert again == v8


def test_a_single_head_refuses_boxes_and_scores_at_its_line(tmp_path: Path) -> None:
    (problem,) = problems_of(write(tmp_path, "{head: yolov8, boxes: 0, scores: 1}"))
    assert "r.yaml:6:" in problem and "model.prepost.detection" in problem
    assert "give `output`" in problem and "`boxes` and `scores`" in problem


def test_two_outputs_refuse_output(tmp_path: Path) -> None:
    (problem,) = problems_of(write(tmp_path, "{output: 1}"))
    assert "r.yaml:6:" in problem and "`output` names a single head" in problem


def test_an_unknown_head_lists_the_known_ones(tmp_path: Path) -> None:
    (problem,) = problems_of(write(tmp_path, "{head: yolov9}"))
    assert "r.yaml:6:" in problem
    assert "yolov8" in problem and "boxes_scores" in problem


def test_core_ml_on_an_onnx_source_says_it_takes_pytorch(tmp_path: Path) -> None:
    """iphone on a YOLO export: the first thing to say is that Core ML cannot take ONNX."""
    from edgebuild.registry import backend_class

    if not backend_class("coreml").implemented:
        pytest.skip("needs the coreml backend (coremltools)")
    path = write(tmp_path, "{head: yolov8}")
    path.write_text(path.read_text() + "  iphone:\n    gates: {size: {max_mb: 4}}\n")
    (problem,) = problems_of(path)
    assert "r.yaml:6:" in problem and "target 'iphone'" in problem
    assert "takes pytorch models, not this ONNX source" in problem
    assert "cannot build NMS into the model" in problem and "`factory:`" in problem


def test_gfl_needs_strides_at_its_line(tmp_path: Path) -> None:
    (problem,) = problems_of(write(tmp_path, "{head: gfl}"))
    assert "r.yaml:6:" in problem and "`head: gfl` needs `strides`" in problem


def test_strides_belong_to_gfl(tmp_path: Path) -> None:
    (problem,) = problems_of(write(tmp_path, "{head: yolov8, strides: [8, 16]}"))
    assert "r.yaml:6:" in problem and "`strides` belongs to `head: gfl`" in problem


def test_gfl_reads_every_output_and_decodes_corners(tmp_path: Path) -> None:
    (problem,) = problems_of(write(tmp_path, "{head: gfl, strides: [8], output: 0, "
                                             "box_format: xyxy}"))
    assert "r.yaml:6:" in problem and "drop `output`, `box_format`" in problem


def test_gfl_anchor_points_follow_paddle_detection() -> None:
    """ceil(size / stride) points each way, row-major, stride by stride, at +offset."""
    from edgebuild.recipe.prepost import gfl_priors

    centres, strides = gfl_priors([8, 64], 800, 608, 0.5)
    assert len(centres) == 100 * 76 + 13 * 10 and strides[-1, 0] == 64
    assert centres[0].tolist() == [4, 4, 4, 4] and centres[1].tolist() == [12, 4, 12, 4]
    assert centres[76].tolist() == [4, 12, 4, 12]  # the second row
    assert centres[-1].tolist() == [9.5 * 64, 12.5 * 64] * 2
    assert gfl_priors([8], 16, 16, 0.0)[0][:, 0].tolist() == [0, 8, 0, 8]
