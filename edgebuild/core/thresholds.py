"""A threshold on scores against the largest score INT8 calibration saw (issue 40, item 1).

Static INT8 clips each activation to its calibrated range, so a score made by INT8
layers cannot rise far above the largest one the calibration data produced (float
layers after the clip can still move it: never_above). When that is below the
threshold a detector's NMS keeps boxes above, the build finds few boxes or none;
when it is below a gate's threshold, the scores the gate relies on are capped. The
quantize stage records both figures (`score_range` in its metadata,
quant/score_range.py); this module turns them into the one sentence a user can act
on. It is in core because the stage, the budget, a failing gate and `edgebuild plan`
all say it.
"""

from __future__ import annotations

from typing import Any

HINT = "calibrate on images with confident detections"


def never_above(seen: float, keeps: str, threshold: float, expect: str) -> str:
    """`calibration never saw a score above 0.21, the detector keeps boxes above 0.25: …`

    Worded as a cause, not a certainty: how far below the threshold the INT8 scores end
    depends on which layers clip (PP-OCRv4's DBNet, calibrated to 0.119, still reached
    0.475 through its float ConvTranspose head; a YOLO head's Sigmoid scores stop at the
    calibrated value and no box is kept)."""
    return (f"calibration never saw a score above {seen:.3g}, {keeps} {threshold:g}: the "
            f"INT8 ranges of the layers that make the scores were calibrated below it "
            f"(expect {expect}); {HINT}")


def nms_sentences(record: dict[str, Any] | None) -> list[str]:
    """One sentence per NMS whose threshold no calibration score passed."""
    return [never_above(float(n["calibrated_max"]), "the detector keeps boxes above",
                        float(n["score_threshold"]), "few or no boxes")
            for n in (record or {}).get("nms", []) if n.get("clipped")]


def gate_sentences(record: dict[str, Any] | None, gate: Any) -> list[str]:
    """Sentences for an accuracy `gate` whose threshold lies above what calibration saw:
    a detection gate's `score_threshold` (the FP32 boxes it counts) against the largest
    score before NMS, a decision gate's `threshold` against the gated output's largest
    value. An NMS already clipped says it all (nms_sentences)."""
    if not record:
        return []
    said = nms_sentences(record)
    if said:
        return said
    task = getattr(gate.task, "value", gate.task)
    nms = record.get("nms", [])
    if task == "detection" and nms:
        seen = max(float(n["calibrated_max"]) for n in nms)
        if seen < gate.score_threshold:
            return [never_above(seen, "the gate counts FP32 boxes scoring at least",
                                gate.score_threshold, "capped scores")]
    outputs = record.get("outputs", {})
    if gate.threshold is not None and gate.output in outputs and \
            float(outputs[gate.output]) <= gate.threshold:
        return [never_above(float(outputs[gate.output]),
                            f"the gate decides '{gate.output}' above", gate.threshold,
                            "lost positives")]
    return []
