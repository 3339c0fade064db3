"""Metrics that fit the output: class scores per position, CTC text, thresholded
decisions, and a build's output leaving the range FP32's spans.

A text recognizer emits `[1, T, C]`: one argmax over its T×C values ("top-1
agreement" of a flattened sequence) says nothing, while per-position agreement and
the greedy-decoded text do. A voice-activity model is judged on `p > 0.5`, not on the
probability's third decimal. A sigmoid that returns −98304 on an accelerator is a
defect any gate on that output must see. These functions take (samples × …) arrays,
as the outputs files store them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from edgebuild.fidelity.metrics import Comparison

if TYPE_CHECKING:
    import numpy as np

OUT_OF_RANGE_KEPT = 5  # out-of-range values listed in a gate's details, the worst first


@dataclass(frozen=True)
class SequenceOptions:
    """How a gate reads an output beyond its values: see the AccuracyGate keys."""

    class_axis: int | None = None
    blank: int = 0
    threshold: float | None = None
    range_tolerance: float | None = 0.5
    trim: tuple[int, ...] = ()  # ctc: classes cut from both ends before comparing labels
    regions: bool = False  # recall and IoU of the positive region (value > threshold)
    peak_threshold: float | None = None  # a region counts where it reaches this


def positions(values: np.ndarray, class_axis: int) -> np.ndarray:
    """(samples × positions, classes): every position of every sample a row of scores."""
    import numpy as np

    axis = class_axis if class_axis > 0 else values.ndim + class_axis
    if not 1 <= axis < values.ndim:
        raise ValueError(f"class_axis {class_axis} is not an axis of the output, shaped "
                         f"[1, {', '.join(map(str, values.shape[1:]))}] a sample")
    moved = np.moveaxis(values, axis, -1)
    return moved.reshape(-1, moved.shape[-1])


def flattened_classes(values: np.ndarray) -> None:
    """Refuse one argmax over several axes: positions and classes would be mixed."""
    wide = [n for n in values.shape[1:] if n > 1]
    if len(wide) > 1:
        raise ValueError(
            f"the output is [1, {', '.join(map(str, values.shape[1:]))}] a sample: one "
            "argmax over all of it mixes positions and classes; declare the class axis "
            "(`class_axis: -1` for [1, T, C]) for per-position agreement, or `task: ctc` "
            "for a CTC text head (docs/gates.md#sequence-outputs)")


def ctc_decode(scores: np.ndarray, blank: int) -> list[list[int]]:
    """Greedy CTC decoding of (samples, T, C): best class per step, repeats collapsed,
    blanks removed."""
    import numpy as np

    best = scores.argmax(axis=-1)
    decoded = []
    for row in best:
        keep = np.ones(len(row), dtype=bool)
        keep[1:] = row[1:] != row[:-1]
        decoded.append([int(c) for c in row[keep] if c != blank])
    return decoded


def edit_distance(a: list[int], b: list[int]) -> int:
    """Levenshtein distance (insertions, deletions, substitutions)."""
    previous = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        current = [i]
        for j, y in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1,
                               previous[j - 1] + (x != y)))
        previous = current
    return previous[-1]


def ctc_metrics(got: np.ndarray, ref: np.ndarray, class_axis: int, blank: int,
                labels: np.ndarray | None = None, trim: tuple[int, ...] = ()) -> Comparison:
    """Exact-match rate and character error rate of the build's decoded text vs FP32's;
    with `labels` (class indices a sample, padded with -1) also vs the labels, the build's
    and FP32's (so a drop is told from what FP32 already misreads), after cutting the
    `trim` classes from both ends of each decoded sequence (a recognizer's padding
    spaces, which an app strips)."""
    import numpy as np

    axis = class_axis if class_axis > 0 else got.ndim + class_axis
    if got.ndim != 3 or axis not in (1, 2):
        raise ValueError(f"a CTC head is [1, T, C] or [1, C, T] a sample; this output is "
                         f"[1, {', '.join(map(str, got.shape[1:]))}]")
    got, ref = np.moveaxis(got, axis, -1), np.moveaxis(ref, axis, -1)
    if not 0 <= blank < got.shape[-1]:
        raise ValueError(f"blank {blank} is not one of the {got.shape[-1]} classes")
    ours, theirs = ctc_decode(got, blank), ctc_decode(ref, blank)
    edits = [edit_distance(o, t) for o, t in zip(ours, theirs, strict=True)]
    length = sum(len(t) for t in theirs)
    differing = [i for i, e in enumerate(edits) if e]
    metrics = {"sequence_match": 100.0 * (1 - len(differing) / len(ours)),
               "cer": 100.0 * sum(edits) / max(length, 1),
               "reference_characters": float(length)}
    shown = [{"sample": i, "fp32": theirs[i], "build": ours[i]} for i in differing[:5]]
    details: dict[str, Any] = {"differing_sequences": shown} if shown else {}
    if labels is not None:
        truth = label_sequences(labels, len(ours), got.shape[-1])
        ours, theirs = _trimmed(ours, trim), _trimmed(theirs, trim)
        for prefix, decoded in (("", ours), ("reference_", theirs)):
            found = _against(decoded, truth)
            metrics[f"{prefix}sequence_match_labels"] = found["match"]
            metrics[f"{prefix}cer_labels"] = found["cer"]
        misread = [{"sample": i, "label": truth[i], "build": ours[i]}
                   for i in range(len(ours)) if ours[i] != truth[i]]
        if misread:
            details["misread_sequences"] = misread[:5]
    return Comparison(metrics, details)


def label_sequences(labels: np.ndarray, samples: int, classes: int) -> list[list[int]]:
    """The labelled sequences: one row of class indices a sample, -1 after its end."""
    import numpy as np

    if labels.ndim != 2 or len(labels) != samples:
        raise ValueError(f"CTC labels are one row of class indices a sample (padded with -1); "
                         f"got shape {list(labels.shape)} for {samples} samples")
    if not np.issubdtype(labels.dtype, np.integer) and not np.all(labels == np.round(labels)):
        raise ValueError("CTC labels are class indices (integers)")
    rows = [[int(c) for c in row if c >= 0] for row in labels]
    bad = sorted({c for row in rows for c in row if c >= classes})
    if bad:
        raise ValueError(f"labels name classes {bad[:5]} the output does not have "
                         f"({classes} classes)")
    return rows


def _trimmed(sequences: list[list[int]], trim: tuple[int, ...]) -> list[list[int]]:
    out = []
    for row in sequences:
        start, end = 0, len(row)
        while start < end and row[start] in trim:
            start += 1
        while end > start and row[end - 1] in trim:
            end -= 1
        out.append(row[start:end])
    return out


def _against(decoded: list[list[int]], truth: list[list[int]]) -> dict[str, float]:
    edits = [edit_distance(d, t) for d, t in zip(decoded, truth, strict=True)]
    return {"match": 100.0 * sum(e == 0 for e in edits) / max(len(edits), 1),
            "cer": 100.0 * sum(edits) / max(sum(len(t) for t in truth), 1)}


def decision_metrics(got: np.ndarray, ref: np.ndarray, threshold: float) -> dict[str, float]:
    """Values on the same side of `threshold` as FP32's, percent, and the decisions FP32
    takes at all (a build cannot agree on a threshold FP32 never crosses)."""
    import numpy as np

    ours, theirs = got > threshold, ref > threshold
    return {"decision_agreement": 100.0 * float(np.mean(ours == theirs)),
            "reference_positive": 100.0 * float(np.mean(theirs)),
            "decisions": float(theirs.size)}


def out_of_range(got: np.ndarray, ref: np.ndarray, tolerance: float) -> dict[str, Any] | None:
    """The build's values outside FP32's span over the dataset, widened by `tolerance`
    times the span on each side; None when all are within."""
    import numpy as np

    low, high = float(ref.min()), float(ref.max())
    pad = tolerance * max(high - low, abs(high), abs(low), 1e-6)
    outside = (got < low - pad) | (got > high + pad)
    count = int(outside.sum())
    if not count:
        return None
    flat = np.flatnonzero(outside.reshape(-1))
    distance = np.maximum(low - got.reshape(-1)[flat], got.reshape(-1)[flat] - high)
    worst = flat[np.argsort(-distance)[:OUT_OF_RANGE_KEPT]]
    per_sample = int(np.prod(got.shape[1:]))
    return {"values": count, "low": low, "high": high, "tolerance": tolerance,
            "samples": int(np.any(outside.reshape(len(got), -1), axis=1).sum()),
            "worst": [{"sample": int(i // per_sample), "value": float(got.reshape(-1)[i])}
                      for i in worst]}
