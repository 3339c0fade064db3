"""Detection metrics on synthetic boxes, and the detection gate's validation."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from edgebuild.fidelity.detection import (
    Detections,
    average_precision,
    detection_metrics,
    iou_matrix,
    load_detections,
)
from edgebuild.recipe.datasets import ImagePreprocess
from edgebuild.recipe.models import AccuracyGate, ModelSource
from edgebuild.recipe.prepost import DetectionPost


def dets(*rows: tuple[float, float, float, float, float, int]) -> Detections:
    """Rows of (x1, y1, x2, y2, score, class)."""
    a = np.array(rows, dtype=np.float64).reshape(-1, 6)
    return Detections(a[:, :4], a[:, 4], a[:, 5])


def metrics(got: list[Detections], ref: list[Detections]) -> dict[str, float]:
    return detection_metrics(got, ref, score_threshold=0.5, iou_threshold=0.5,
                             score_tolerance=0.05)


FACE = (10, 10, 30, 30, 0.9, 0)
CAT = (50, 50, 90, 80, 0.8, 1)


def test_iou_of_known_boxes() -> None:
    iou = iou_matrix(np.array([[0, 0, 10, 10]], float),
                     np.array([[0, 0, 10, 10], [5, 0, 15, 10], [20, 20, 30, 30],
                               [10, 10, 0, 0]], float))
    assert iou[0] == pytest.approx([1.0, 50 / 150, 0.0, 1.0])  # corners in any order


def test_perfect_match() -> None:
    m = metrics([dets(FACE, CAT)], [dets(FACE, CAT)])
    assert m["box_agreement"] == 100.0 and m["map50"] == 100.0
    assert m["score_agreement"] == 100.0 and m["reference_boxes"] == 2.0
    assert m["extra_boxes"] == 0.0


def test_shifted_box_counts_only_above_the_iou_threshold() -> None:
    slightly = (12, 10, 32, 30, 0.9, 0)  # IoU 18*20 / (2*400 - 360) = 0.82
    far = (22, 10, 42, 30, 0.9, 0)  # IoU 8*20 / (800 - 160) = 0.25
    assert metrics([dets(slightly)], [dets(FACE)])["box_agreement"] == 100.0
    m = metrics([dets(far)], [dets(FACE)])
    assert m["box_agreement"] == 0.0 and m["map50"] == 0.0 and m["extra_boxes"] == 1.0


def test_missing_box_and_score_drift() -> None:
    drifted = (10, 10, 30, 30, 0.7, 0)  # found, but 0.2 below FP32's score
    m = metrics([dets(drifted)], [dets(FACE, CAT)])
    assert m["box_agreement"] == 50.0
    assert m["score_agreement"] == 0.0
    assert m["map50"] == pytest.approx(50.0)  # class 0 AP 1, class 1 AP 0


def test_class_mismatch_is_no_match() -> None:
    other_class = (10, 10, 30, 30, 0.9, 1)
    m = metrics([dets(other_class)], [dets(FACE)])
    assert m["box_agreement"] == 0.0 and m["map50"] == 0.0


def test_low_reference_boxes_are_not_required_but_low_build_scores_still_match() -> None:
    weak = (60, 60, 70, 70, 0.3, 0)  # FP32 below score_threshold: nothing to find
    just_below = (10, 10, 30, 30, 0.49, 0)  # the build's score dipped under the threshold
    m = metrics([dets(just_below)], [dets(FACE, weak)])
    assert m["reference_boxes"] == 1.0 and m["box_agreement"] == 100.0


def test_empty_images() -> None:
    empty = dets()
    assert metrics([empty, empty], [empty, empty])["box_agreement"] == 100.0
    m = metrics([dets(FACE)], [empty])  # a confident box FP32 did not give
    assert m["box_agreement"] == 0.0 and m["extra_boxes"] == 1.0
    assert metrics([empty], [dets(FACE)])["box_agreement"] == 0.0


def test_average_precision_ranks_by_score() -> None:
    # two truths; hits at ranks 1 and 3: AP = 1·0.5 + (2/3)·0.5
    ap = average_precision(np.array([1.0, 0.0, 1.0]), np.array([0.9, 0.8, 0.7]), 2)
    assert ap == pytest.approx(0.5 + 2 / 3 * 0.5)


def test_load_drops_padding_rows(tmp_path: Path) -> None:
    boxes = np.zeros((2, 3, 4), np.float32)
    boxes[0, 0] = FACE[:4]
    scores = np.array([[0.9, 0.0, 0.0], [0.0, 0.0, 0.0]], np.float32)
    classes = np.array([[0, -1, -1], [-1, -1, -1]], np.float32)
    np.savez(tmp_path / "o.npz", **{"output:b": boxes, "output:s": scores,
                                    "output:c": classes})
    loaded = load_detections(tmp_path / "o.npz", "b", "s", "c")
    assert [len(d.scores) for d in loaded] == [1, 0]
    with pytest.raises(ValueError, match="no output 'x'"):
        load_detections(tmp_path / "o.npz", "x", "s", None)


def test_mismatched_image_counts() -> None:
    with pytest.raises(ValueError, match="2 images of detections against 1"):
        metrics([dets(), dets()], [dets()])


def gate(**keys: object) -> AccuracyGate:
    return AccuracyGate.model_validate({"dataset": "photos", **keys})


def test_detection_gate_validation() -> None:
    ok = gate(task="detection", boxes="b", scores="s", classes="c", min_box_agreement=99)
    assert ok.checked_outputs == ["b", "s", "c"]
    with pytest.raises(ValidationError, match="compare values position by position"):
        gate(task="detection", boxes="b", scores="s", min_top1_agreement=99)
    with pytest.raises(ValidationError, match="compare values position by position"):
        gate(task="detection", boxes="b", scores="s", min_cosine=0.9)
    with pytest.raises(ValidationError, match="needs `boxes:` and `scores:`"):
        gate(task="detection", boxes="b", min_map50=90)
    with pytest.raises(ValidationError, match="instead of `output:`"):
        gate(task="detection", output="b", boxes="b", scores="s", min_map50=90)
    with pytest.raises(ValidationError, match="set at least one limit"):
        gate(task="detection", boxes="b", scores="s")
    with pytest.raises(ValidationError, match="add `task: detection`"):
        gate(min_box_agreement=99)
    with pytest.raises(ValidationError, match="add `task: detection`"):
        gate(task="regression", boxes="b", min_cosine=0.9)
    with pytest.raises(ValidationError, match="looks like a fraction"):
        gate(task="detection", boxes="b", scores="s", min_box_agreement=0.99)


def test_prepost_and_letterbox_validation() -> None:
    with pytest.raises(ValidationError, match="name the same model output"):
        DetectionPost(boxes=1, scores=1)
    # An ONNX source takes prepost too (composed on the graph: passes/prepost_onnx.py).
    assert ModelSource.model_validate({"onnx": "m.onnx", "prepost": {"input": {}}}).prepost
    with pytest.raises(ValidationError, match="prepost adds nothing"):
        ModelSource.model_validate({"factory": "m.py:build", "prepost": {}})
    with pytest.raises(ValidationError, match="letterbox replaces resize"):
        ImagePreprocess(letterbox=[128, 128], resize=128)
    with pytest.raises(ValidationError, match="dtype uint8 keeps raw pixels"):
        ImagePreprocess(dtype="uint8", mean=[127.0])
