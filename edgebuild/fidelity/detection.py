"""Detection metrics: a build's boxes against the FP32 reference's, matched by IoU.

Detections change count and order between builds, so nothing is compared position
by position. Per image, FP32's boxes scoring >= `score_threshold` are the ones to
find ("ground truth"); a build box finds one when it has the same class and IoU >=
`iou_threshold` (each box matched at most once, best scores first, as in VOC/COCO):

    box agreement   found FP32 boxes / FP32 boxes               (any build score > 0)
    mAP@iou         mean over FP32's classes of the area under the build's
                    precision/recall curve (all-point interpolation)
    score agreement found boxes whose build score is within `score_tolerance`

Rows of score <= 0 (or class < 0) are padding and ignored.

With labelled boxes (a dataset's `labels: {format: yolo | coco, …}`, stored with the
outputs as `truth:*`), the same matching against the labels instead of FP32 gives
mAP against ground truth, for the build and for the FP32 reference alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from edgebuild.errors import DataError


@dataclass(frozen=True)
class Detections:
    """One image's detections: boxes N×4 (x1, y1, x2, y2), scores N, classes N."""

    boxes: np.ndarray
    scores: np.ndarray
    classes: np.ndarray

    def above(self, threshold: float) -> Detections:
        keep = self.scores >= threshold
        return Detections(self.boxes[keep], self.scores[keep], self.classes[keep])


def iou_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of every box in a (N×4) with every box in b (M×4); corners in any order."""
    a = np.concatenate([np.minimum(a[:, :2], a[:, 2:]), np.maximum(a[:, :2], a[:, 2:])], 1)
    b = np.concatenate([np.minimum(b[:, :2], b[:, 2:]), np.maximum(b[:, :2], b[:, 2:])], 1)
    low = np.maximum(a[:, None, :2], b[None, :, :2])
    high = np.minimum(a[:, None, 2:], b[None, :, 2:])
    inter = np.prod(np.clip(high - low, 0, None), axis=2)
    area_a = np.prod(a[:, 2:] - a[:, :2], axis=1)
    area_b = np.prod(b[:, 2:] - b[:, :2], axis=1)
    union = area_a[:, None] + area_b[None, :] - inter
    return np.where(union > 0, inter / np.where(union > 0, union, 1), 0.0)


def match(found: Detections, truth: Detections, iou_threshold: float) -> np.ndarray:
    """For each found box (best score first), the index of the truth box it matches, or -1.

    Greedy as in VOC/COCO evaluation: a found box takes the unmatched same-class truth box
    of highest IoU, if that IoU reaches the threshold.
    """
    result = np.full(len(found.scores), -1, dtype=np.int64)
    if len(found.scores) == 0 or len(truth.scores) == 0:
        return result
    iou = iou_matrix(found.boxes, truth.boxes)
    iou[found.classes[:, None] != truth.classes[None, :]] = -1.0
    taken = np.zeros(len(truth.scores), dtype=bool)
    for i in np.argsort(-found.scores, kind="stable"):
        candidates = np.where(taken, -1.0, iou[i])
        j = int(np.argmax(candidates))
        if candidates[j] >= iou_threshold:
            result[i] = j
            taken[j] = True
    return result


def average_precision(tp: np.ndarray, scores: np.ndarray, positives: int) -> float:
    """All-point interpolated AP of detections (true-positive flags, scores)."""
    if positives == 0:
        return float("nan")
    order = np.argsort(-scores, kind="stable")
    hits = np.cumsum(tp[order])
    recall = np.concatenate([[0.0], hits / positives, [1.0]])
    precision = np.concatenate([[1.0], hits / np.arange(1, len(order) + 1), [0.0]])
    precision = np.maximum.accumulate(precision[::-1])[::-1]
    steps = np.where(recall[1:] != recall[:-1])[0]
    return float(np.sum((recall[steps + 1] - recall[steps]) * precision[steps + 1]))


def detection_metrics(got: list[Detections], ref: list[Detections], score_threshold: float,
                      iou_threshold: float, score_tolerance: float) -> dict[str, float]:
    """Box agreement, mAP and score agreement (percent) of `got` against FP32's `ref`."""
    if len(got) != len(ref):
        raise ValueError(f"{len(got)} images of detections against {len(ref)} in the reference")
    truths = [r.above(score_threshold) for r in ref]
    total = sum(len(t.scores) for t in truths)
    found = agreeing = extra = 0
    per_class: dict[int, list[tuple[float, bool]]] = {}
    positives: dict[int, int] = {}
    for g, truth in zip(got, truths, strict=True):
        valid = g.above(np.nextafter(0.0, 1.0))
        matched = match(valid, truth, iou_threshold)
        hit = matched >= 0
        found += int(hit.sum())
        agreeing += int(np.sum(np.abs(valid.scores[hit] - truth.scores[matched[hit]])
                               <= score_tolerance))
        extra += int(np.sum(~hit & (valid.scores >= score_threshold)))
        for c in truth.classes.astype(np.int64).tolist():
            positives[c] = positives.get(c, 0) + 1
        for s, c, h in zip(valid.scores.tolist(), valid.classes.astype(np.int64).tolist(),
                           hit.tolist(), strict=True):
            per_class.setdefault(c, []).append((s, h))
    aps = []
    for c, count in positives.items():
        rows = per_class.get(c, [])
        aps.append(average_precision(np.array([h for _, h in rows], dtype=np.float64),
                                     np.array([s for s, _ in rows], dtype=np.float64), count))
    if total == 0:  # nothing to find: agreement means finding nothing confident either
        nothing = extra == 0
        box, mean_ap, score = (100.0, 100.0, 100.0) if nothing else (0.0, 0.0, 0.0)
    else:
        box = 100.0 * found / total
        mean_ap = 100.0 * float(np.mean(aps))
        score = 100.0 * agreeing / found if found else 0.0
    return {"samples": float(len(got)), "reference_boxes": float(total),
            "box_agreement": box, "map50": mean_ap, "score_agreement": score,
            "extra_boxes": float(extra)}


def load_detections(path: Path, boxes: str, scores: str, classes: str | None
                    ) -> list[Detections]:
    """Per-image detections from a stored outputs file (samples × D × 4, samples × D, …)."""
    with np.load(path) as archive:
        stored = [k.removeprefix("output:") for k in archive.files if k.startswith("output:")]
        for name in (boxes, scores, classes):
            if name is not None and name not in stored:
                raise ValueError(f"the model produced no output '{name}' (it has {stored})")
        b = archive[f"output:{boxes}"].astype(np.float64)
        s = archive[f"output:{scores}"].astype(np.float64)
        c = (archive[f"output:{classes}"].astype(np.float64) if classes is not None
             else np.zeros_like(s))
    n = len(s)
    b, s, c = b.reshape(n, -1, 4) if b.size % 4 == 0 else b, s.reshape(n, -1), c.reshape(n, -1)
    if b.ndim != 3 or b.shape[1] != s.shape[1] or c.shape != s.shape:
        raise ValueError(f"boxes {list(b.shape)}, scores {list(s.shape)} and classes "
                         f"{list(c.shape)} do not describe the same detections (want N×D×4, "
                         "N×D, N×D)")
    result = []
    for i in range(n):
        valid = (s[i] > 0) & (c[i] >= 0)
        result.append(Detections(b[i][valid], s[i][valid], c[i][valid]))
    return result


def load_truth(path: Path) -> list[Detections] | None:
    """The labelled boxes stored with a dataset's outputs (score 1 each), or None."""
    with np.load(path) as archive:
        if "truth:counts" not in archive.files:
            return None
        boxes = archive["truth:boxes"].astype(np.float64).reshape(-1, 4)
        classes = archive["truth:classes"].astype(np.float64)
        counts = archive["truth:counts"].astype(np.int64)
    ends = np.cumsum(counts)
    return [Detections(boxes[end - n:end], np.ones(n), classes[end - n:end])
            for n, end in zip(counts.tolist(), ends.tolist(), strict=True)]


def truth_metrics(got: list[Detections], ref: list[Detections], truth: list[Detections],
                  iou_threshold: float) -> dict[str, float]:
    """mAP and recall (percent) of the build and of FP32 against labelled boxes.

    Every build box (score > 0) is ranked, as COCO/VOC do; a class that no label holds
    adds no AP (its boxes are not counted as false positives of another class).
    """
    boxes = sum(len(t.scores) for t in truth)
    if boxes == 0:  # the data's mistake, not the model's: exit 2, not a failed gate
        raise DataError(f"the dataset's labels hold no box on any of its {len(truth)} images, "
                        "so mAP against them is undefined",
                        "check `labels.path` (a YOLO folder of non-empty .txt files named as "
                        "the images, or a COCO file whose annotations name them), and that "
                        "`limit` keeps labelled images")
    build = detection_metrics(got, truth, 0.5, iou_threshold, 1.0)
    fp32 = detection_metrics(ref, truth, 0.5, iou_threshold, 1.0)
    return {"labelled_boxes": float(boxes),
            "map50_labels": build["map50"], "recall_labels": build["box_agreement"],
            "reference_map50_labels": fp32["map50"],
            "reference_recall_labels": fp32["box_agreement"],
            "map50_labels_drop": fp32["map50"] - build["map50"]}
