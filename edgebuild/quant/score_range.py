"""Does the calibration data reach the score a detector keeps? One comparison, one line.

Static INT8 clips every activation to the range calibration saw. A detector's decode
keeps a box only when its score is above a threshold (ONNX `NonMaxSuppression`'s
`score_threshold`: the composed `model.prepost`, or the file's own NMS), so when no
calibration image ever scores above that threshold, the layers that make the scores
are calibrated below it: a YOLO head's scores stop there and the build keeps no box on
any image (a head with float weight layers after the clip falls short less), while
every per-layer figure blames some late node:

    calibration images ─▶ FP32 scores, largest 0.21 ──┐
                                                       ├─ 0.21 ≤ 0.25: no box, ever
    NonMaxSuppression(score_threshold 0.25) ───────────┘

Both numbers are in the quantize stage (the graph and its calibration data), so it
compares them and says so in one sentence (`ScoreRange.sentence`); a gate's own
threshold (`score_threshold` of a detection gate, `threshold` of a decision gate) is
compared with the same figure when the gate is evaluated (gates/kinds/accuracy.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from edgebuild.core.thresholds import never_above


@dataclass(frozen=True)
class ScoreRange:
    """The largest score calibration saw feeding one NMS, against that NMS's threshold."""

    node: str  # the NonMaxSuppression
    tensor: str  # its scores input
    seen: float  # largest FP32 score over the calibration samples probed
    threshold: float  # NMS keeps a box scoring above this
    samples: int

    @property
    def clipped(self) -> bool:
        """No calibration score passed the threshold: INT8 clips every score below it."""
        return self.seen <= self.threshold

    def sentence(self) -> str:
        return never_above(self.seen, "the detector keeps boxes above", self.threshold,
                           "few or no boxes")

    def to_json(self) -> dict[str, Any]:
        return {"node": self.node, "tensor": self.tensor, "calibrated_max": round(self.seen, 6),
                "score_threshold": round(self.threshold, 6), "samples": self.samples,
                "clipped": self.clipped}


def _constant(graph: Any, name: str) -> float | None:
    """The scalar value of an initializer or Constant output `name`, else None."""
    from onnx import numpy_helper

    for init in graph.initializer:
        if init.name == name:
            return float(np.asarray(numpy_helper.to_array(init)).reshape(-1)[0])
    for node in graph.node:
        if node.op_type == "Constant" and node.output[0] == name:
            for attr in node.attribute:
                if attr.name == "value":
                    return float(np.asarray(numpy_helper.to_array(attr.t)).reshape(-1)[0])
                if attr.name == "value_float":
                    return float(attr.f)
    return None


def nms_thresholds(graph: Any) -> list[tuple[str, str, float]]:
    """(node, scores tensor, score threshold) of each NonMaxSuppression with a constant
    score threshold (input 4; without it NMS keeps every score)."""
    found = []
    for node in graph.node:
        if node.op_type != "NonMaxSuppression" or len(node.input) < 5 or not node.input[4]:
            continue
        threshold = _constant(graph, node.input[4])
        if threshold is not None:
            found.append((node.name, node.input[1], threshold))
    return found


def record(model: Any, feeds: list[dict[str, np.ndarray]]) -> dict[str, Any] | None:
    """The quantize stage's `score_range` metadata, from one FP32 pass over `feeds`: each
    NMS's threshold against the largest score feeding it (`nms`), the largest value of
    each graph output (`outputs`, what a decision gate's threshold is compared with),
    and a `warning` sentence when an NMS can keep nothing."""
    from edgebuild.quant.safety import tensor_ranges

    if not feeds:
        return None
    found = nms_thresholds(model.graph)
    outputs = [o.name for o in model.graph.output]
    ranges = tensor_ranges(model, [*(tensor for _, tensor, _ in found), *outputs], feeds)
    checks = [ScoreRange(node, tensor, ranges[tensor][1], threshold, len(feeds))
              for node, tensor, threshold in found if tensor in ranges]
    result: dict[str, Any] = {
        "samples": len(feeds), "nms": [c.to_json() for c in checks],
        "outputs": {name: round(ranges[name][1], 6) for name in outputs if name in ranges}}
    clipped = [c.sentence() for c in checks if c.clipped]
    if clipped:
        result["warning"] = clipped[0]
    return result
