"""What a build's outputs measure against FP32's (and the labels): one output, or a
slice of it, turned into the figures a gate limits.

Comparisons are per sample, so one sample cannot hide another's error. Which figures
mean something depends on what the output holds (the gate's `task`): class metrics for
class scores, value metrics for maps and embeddings, decoded text for CTC, matched boxes
for a detector. The verdict (fidelity/verdict.py) then holds them against the limits.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgebuild.fidelity.metrics import (
    Comparison,
    blind_part,
    decided_agreement,
    non_finite,
    per_channel,
    take,
    value_metrics,
)
from edgebuild.fidelity.outputs import read_output
from edgebuild.fidelity.sequence import (
    SequenceOptions,
    ctc_metrics,
    decision_metrics,
    flattened_classes,
    out_of_range,
    positions,
)
from edgebuild.recipe.accuracy import REGION_LIMITS, SCALED_LIMITS, AccuracyGate, AccuracyTask

if TYPE_CHECKING:
    import numpy as np

    from edgebuild.recipe.models import OutputSlice


def compare_gate(candidate: Path, reference: Path, gate: AccuracyGate,
                 rows: int | None = None) -> Comparison:
    """What `gate` compares of two outputs files: one output (or a slice of it) as `compare`
    does, or a detector's boxes matched by IoU (fidelity/detection.py)."""
    if gate.task is not AccuracyTask.DETECTION:
        scaled = {k: float(getattr(gate, k)) for k in SCALED_LIMITS
                  if getattr(gate, k) is not None}
        return compare(candidate, reference, gate.output, gate.task.value, part=gate.slice,
                       channel_axis=gate.channel_axis, margin=gate.margin,
                       scaled_limits=scaled, rows=rows,
                       sequence=SequenceOptions(
                           gate.class_axis, gate.blank, gate.threshold, gate.range_tolerance,
                           tuple(gate.trim), regions=any(getattr(gate, k) is not None
                                                         for k in REGION_LIMITS),
                           peak_threshold=gate.peak_threshold))
    from edgebuild.fidelity.detection import (
        detection_metrics,
        load_detections,
        load_truth,
        truth_metrics,
    )

    assert gate.boxes is not None and gate.scores is not None  # the schema checks it
    got, ref = (load_detections(p, gate.boxes, gate.scores, gate.classes)
                for p in (candidate, reference))
    metrics = detection_metrics(got, ref, gate.score_threshold, gate.iou_threshold,
                                gate.score_tolerance)
    truth = load_truth(candidate)
    if truth is not None:
        if len(truth) != len(got):
            raise ValueError(f"{len(truth)} images of labels against {len(got)} of detections")
        iou = gate.labels_iou_threshold or gate.iou_threshold
        metrics.update(truth_metrics(got, ref, truth, iou))
        metrics["labels_iou_threshold"] = iou
    return Comparison(metrics)


def accuracy_metrics(candidate: Path, reference: Path, output: str | None = None,
                     task: str = "classification") -> dict[str, float]:
    """Every metric the gate can check on one whole output (see `compare`)."""
    return compare(candidate, reference, output, task).metrics


def compare(candidate: Path, reference: Path, output: str | None = None,
            task: str = "classification", *, part: OutputSlice | None = None,
            channel_axis: int | str | None = None, margin: float | None = None,
            scaled_limits: dict[str, float] | None = None,
            sequence: SequenceOptions | None = None,
            rows: int | None = None) -> Comparison:
    """The metrics of one output (or `part` of it) against FP32, and what explains them.

    Comparisons with FP32 are per sample, so one sample cannot hide another's error;
    class metrics (top-k, agreement) only for a classification output, where an
    argmax means something. A NaN or Inf gives only its counts (`non_finite_values`):
    no figure computed over it means anything. `channel_axis`: cosine, relative error
    and PSNR per channel, the worst one gated. `scaled_limits` (min_cosine,
    max_relative_error, min_psnr on the whole output): refused with `blind` in the
    details when FP32 with its small-range channels zeroed would pass them.
    `sequence`: the class axis (per-position agreement), CTC decoding, a decision
    threshold and the range check (fidelity/sequence.py). `rows`: the calls the outputs
    came from; an output with another row count has no sample axis, and is refused
    rather than compared as if its first axis were the samples.
    """
    options = sequence or SequenceOptions()
    got, ref, labels, name = _read_pair(candidate, reference, output, rows, part)
    metrics: dict[str, float] = {"samples": float(len(got))}
    for who, values in (("candidate", got), ("reference", ref)):
        bad = non_finite(values)
        if bad is not None:
            metrics.update({"non_finite_values": float(bad["values"]),
                            "non_finite_samples": float(bad["samples"])})
            return Comparison(metrics, {"non_finite": {**bad, "in": who}})
    details: dict[str, Any] = {} if output is not None else {"output_name": name}
    if options.range_tolerance is not None:
        left = out_of_range(got, ref, options.range_tolerance)
        if left is not None:
            metrics["out_of_range_values"] = float(left["values"])
            details["out_of_range"] = left
    if isinstance(channel_axis, int):
        found = per_channel(got, ref, channel_axis)
        metrics.update(found.metrics)
        details.update(found.details)
    else:
        metrics.update(value_metrics(got, ref))
        blind = (blind_part(ref, task, scaled_limits or {})
                 if channel_axis is None else None)
        if blind is not None:
            details["blind"] = blind
    if options.threshold is not None:
        metrics.update(decision_metrics(got, ref, options.threshold))
        if options.regions:
            from edgebuild.fidelity.regions import region_metrics

            found_regions, said = region_metrics(got, ref, options.threshold,
                                                 options.peak_threshold)
            metrics.update(found_regions)
            details.update(said)
    if task == "ctc":
        found = ctc_metrics(got, ref, -1 if options.class_axis is None else options.class_axis,
                            options.blank, labels, options.trim)
        metrics.update(found.metrics)
        details.update(found.details)
        return Comparison(metrics, details)
    if task == "classification":
        found = _class_metrics(got, ref, labels, options.class_axis, margin)
        metrics.update(found.metrics)
        details.update(found.details)
    return Comparison(metrics, details)


def _read_pair(candidate: Path, reference: Path, output: str | None, rows: int | None,
               part: OutputSlice | None) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, str]:
    """One output of both files (or `part` of it), its labels and name, checked to be
    comparable sample by sample."""
    got, labels, name = read_output(candidate, output)
    ref, _, _ = read_output(reference, output)
    if rows is not None and len(got) != rows:
        raise ValueError(
            f"output '{output or 'the first'}' has {len(got)} rows for {rows} samples: it "
            f"has no sample "
            f"axis (a recurrent state [2, 1, 128] concatenates to 2 rows a sample), so its "
            f"first axis is not the samples. Declare it in `state:` with the input it "
            f"feeds, and it is compared one sample (one step) at a time")
    if got.shape != ref.shape:
        raise ValueError(f"output shape {got.shape} differs from the reference {ref.shape}")
    return take(got, part), take(ref, part), labels, name


def _class_metrics(got: np.ndarray, ref: np.ndarray, labels: np.ndarray | None,
                   class_axis: int | None, margin: float | None) -> Comparison:
    """A classification output's class metrics: agreement with FP32's top-1, decided
    agreement at `margin`, and with labels top-1, its drop and top-5. `class_axis`:
    one class vector per position (a sequence), else one per sample."""
    import numpy as np

    metrics: dict[str, float] = {}
    details: dict[str, Any] = {}
    if class_axis is not None:
        count = len(got)
        got, ref = positions(got, class_axis), positions(ref, class_axis)
        metrics["positions"] = float(len(got) // max(count, 1))
        labels = labels.reshape(-1) if labels is not None and labels.size == len(got) else None
    else:
        flattened_classes(got)
    got, ref = got.reshape(len(got), -1), ref.reshape(len(ref), -1)
    top1 = got.argmax(axis=1)
    ref_top1 = ref.argmax(axis=1)
    metrics["classes"] = float(got.shape[1])
    metrics["top1_agreement"] = 100.0 * float(np.mean(top1 == ref_top1))
    if got.shape[1] >= 2:
        flips = decided_agreement(got, ref, margin)
        metrics.update(flips.metrics)
        details.update(flips.details)
    elif margin is not None:
        raise ValueError("decided agreement needs two classes or more to have a top-2")
    if labels is not None:
        labels = _checked_labels(labels, got.shape[1])
        metrics["top1"] = 100.0 * float(np.mean(top1 == labels))
        metrics["reference_top1"] = 100.0 * float(np.mean(ref_top1 == labels))
        metrics["top1_drop"] = metrics["reference_top1"] - metrics["top1"]
        if got.shape[1] > 5:  # with 5 classes or fewer, top-5 is 100 % whatever the model
            top5 = np.argpartition(-got, 4, axis=1)[:, :5]
            metrics["top5"] = 100.0 * float(np.mean(np.any(top5 == labels[:, None], axis=1)))
    return Comparison(metrics, details)


def _checked_labels(labels: np.ndarray, classes: int) -> np.ndarray:
    """Integer class indices within the output's classes, or a clear error."""
    import numpy as np

    if not np.issubdtype(labels.dtype, np.integer):
        raise ValueError(f"labels are {labels.dtype}, not integer class indices")
    if len(labels) and (labels.min() < 0 or labels.max() >= classes):
        raise ValueError(f"labels range over {labels.min()}..{labels.max()}, but the output "
                         f"has {classes} classes (0..{classes - 1})")
    return labels
