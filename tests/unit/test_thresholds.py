"""The calibration line for a gate's own threshold (core/thresholds.py, issue 40 item 1),
on the records the quantize stage writes (`score_range`)."""

from __future__ import annotations

from edgebuild.core.thresholds import HINT, gate_sentences, nms_sentences
from edgebuild.recipe.models import AccuracyGate

DETECTION = {"dataset": "d", "task": "detection", "boxes": "boxes", "scores": "scores",
             "classes": "classes", "min_box_agreement": 90}


def nms(seen: float, threshold: float) -> dict[str, object]:
    return {"nms": [{"node": "nms", "tensor": "s", "calibrated_max": seen,
                     "score_threshold": threshold, "clipped": seen <= threshold}],
            "outputs": {"scores": seen}}


def test_a_clipped_nms_is_said_once_whatever_the_gate() -> None:
    gate = AccuracyGate(**DETECTION, score_threshold=0.5)
    (line,) = gate_sentences(nms(0.2066, 0.25), gate)
    assert line.startswith("calibration never saw a score above 0.207, the detector keeps "
                           "boxes above 0.25: ") and line.endswith(HINT)
    assert nms_sentences(nms(0.3, 0.25)) == []


def test_a_detection_gate_above_the_calibrated_scores() -> None:
    gate = AccuracyGate(**DETECTION, score_threshold=0.5)
    (line,) = gate_sentences(nms(0.3, 0.25), gate)
    assert "the gate counts FP32 boxes scoring at least 0.5" in line
    assert gate_sentences(nms(0.6, 0.25), gate) == []


def test_a_decision_gate_above_the_calibrated_output() -> None:
    gate = AccuracyGate(dataset="d", output="map", task="dense", min_decision_agreement=99,
                        threshold=0.3)
    record = {"nms": [], "outputs": {"map": 0.119}}
    (line,) = gate_sentences(record, gate)
    assert "calibration never saw a score above 0.119, the gate decides 'map' above 0.3" in line
    assert gate_sentences({"nms": [], "outputs": {"map": 0.9}}, gate) == []
    assert gate_sentences(None, gate) == []
