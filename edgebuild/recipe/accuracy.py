"""The accuracy gate's schema: which output (or slice of one), and the limits on it.

Split from recipe/models.py so the gate's rules (which limit means something for
which task, a slice, a per-channel axis, the decided-agreement margin) read in one place.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import Field, field_validator, model_validator

from edgebuild.recipe.common import Strict


def _percent(value: float | None) -> float | None:
    if value is not None and 0 < value <= 1:
        raise ValueError(f"{value} looks like a fraction; this key is in percent (e.g. 99)")
    return value


class AccuracyTask(StrEnum):
    """What an output holds, which decides the metrics that mean something for it."""

    CLASSIFICATION = "classification"  # class scores: top-k, agreement of the argmax
    REGRESSION = "regression"  # values: boxes, landmarks, embeddings
    DENSE = "dense"  # maps: segmentation, heat maps, depth
    DETECTION = "detection"  # boxes, scores, classes after NMS: matched by IoU
    CTC = "ctc"  # per-step class scores of a text/speech recognizer: greedy-decoded text


CLASS_LIMITS = ("min_top1", "min_top5", "max_top1_drop", "min_top1_agreement",
                "min_decided_agreement")
VALUE_LIMITS = ("min_cosine", "max_abs_error", "max_relative_error", "min_psnr",
                "min_decision_agreement", "min_region_recall", "min_region_iou")
# Limits on the positive region of a sparse binary map (value > threshold): a text
# detector's heat map, where agreement counts the empty background (fidelity/regions.py).
REGION_LIMITS = ("min_region_recall", "min_region_iou")
SEQUENCE_LIMITS = ("min_sequence_match", "max_cer", "min_sequence_match_labels",
                   "max_cer_labels")
# The limits relative to the output's own scale: a small-range part of a mixed-range
# output (a detector head's scores beside its box pixels) hides inside them.
SCALED_LIMITS = ("min_cosine", "max_relative_error", "min_psnr")
DETECTION_LIMITS = ("min_box_agreement", "min_map50", "min_score_agreement",
                    "min_map50_labels", "max_map50_labels_drop")
# Keys that need a dataset with labelled boxes.
LABELLED_BOX_KEYS = ("min_map50_labels", "max_map50_labels_drop", "labels_iou_threshold")
DETECTION_KEYS = ("boxes", "scores", "classes", "score_threshold", "iou_threshold",
                  "score_tolerance", "labels_iou_threshold")
# Keys that say what is compared (and how), not a limit.
SELECTION_KEYS = ("dataset", "output", "task", "slice", "channel_axis", "margin",
                  "class_axis", "blank", "threshold", "peak_threshold", "range_tolerance",
                  "trim")


class OutputSlice(Strict):
    """Part of an output along one axis, `start:stop` as in NumPy (stop excluded)."""

    axis: int = Field(description="The output's axis as the model emits it: 0 is the "
                      "batch, so 1 or more (negative counts from the last).")
    start: int | None = Field(None, description="First index kept (negative: from the "
                              "end); default the first.")
    stop: int | None = Field(None, description="Index after the last kept (negative: "
                             "from the end); default past the last.")

    @model_validator(mode="after")
    def _sensible(self) -> OutputSlice:
        if self.axis == 0:
            raise ValueError("axis 0 is the batch (the samples): slice a model axis, e.g. "
                             "`axis: 1` for the rows of a [1, 4+C, N] detector head")
        if self.start is None and self.stop is None:
            raise ValueError("a slice keeps everything without `start:` or `stop:`")
        if (self.start is not None and self.stop is not None
                and (self.start >= 0) == (self.stop >= 0) and self.start >= self.stop):
            raise ValueError(f"start {self.start} is not before stop {self.stop}: "
                             "the slice is empty")
        return self

    @property
    def label(self) -> str:
        """NumPy's spelling: `[:, 4:]` for axis 1, `[..., :4]` for axis -1."""
        part = f"{'' if self.start is None else self.start}:" \
               f"{'' if self.stop is None else self.stop}"
        if self.axis > 0:
            return "[" + ":, " * self.axis + part + "]"
        return "[..., " + part + ", :" * (-self.axis - 1) + "]"


class AccuracyGate(Strict):
    """Task accuracy (with labels) or agreement with the FP32 reference, on one output."""

    dataset: str = Field(description="Name of a dataset in `datasets:`.")
    output: str | None = Field(
        None, description="The model output this gate checks (one of `outputs:`); default: "
        "the first. Several outputs: a list of accuracy gates, one per output.")
    slice: OutputSlice | None = Field(
        None, description="Gate only this part of `output:` along one axis, e.g. the class "
        "scores of a [1, 4+C, N] detector head: `{axis: 1, start: 4}` "
        "(docs/gates.md#a-slice-of-an-output).")
    channel_axis: int | Literal["whole"] | None = Field(
        None, description="min_cosine, max_relative_error and min_psnr per channel along "
        "this axis, gated on the worst channel (`whole`: on the whole output, as one "
        "vector). Unset: the whole output, refused when a small-range part could be "
        "destroyed unseen (docs/gates.md#mixed-range-outputs).")
    task: AccuracyTask = Field(
        AccuracyTask.CLASSIFICATION, description="`classification` (class scores), "
        "`regression` (boxes, landmarks, embeddings), `dense` (maps), `detection` (boxes, "
        "scores and classes after NMS; name them with `boxes:`, `scores:`, `classes:`) or "
        "`ctc` (per-step class scores of a recognizer, greedy-decoded): top-k and agreement "
        "limits are for classification only.")
    class_axis: int | None = Field(
        None, description="Classification: the axis of the class scores when the output has "
        "positions too (`-1` for a [1, T, C] sequence): top-1 and decided agreement are then "
        "per position. Ctc: default -1. Required when a sample has more than one axis "
        "(docs/gates.md#sequence-outputs).")
    blank: int = Field(0, ge=0, description="Ctc: the index of the blank class.")
    trim: list[int] = Field(
        default_factory=list, description="Ctc, with labels: classes cut from both ends of "
        "each decoded sequence before it is compared with its label (a recognizer's "
        "padding spaces, which an app strips).")
    threshold: float | None = Field(
        None, description="With min_decision_agreement: the decision is value > threshold "
        "(e.g. 0.5 for a speech probability). With min_region_recall / min_region_iou: the "
        "positive region is value > threshold (e.g. 0.4 for a CRAFT text map).")
    peak_threshold: float | None = Field(
        None, description="With min_region_recall / min_region_iou: a connected region above "
        "`threshold` counts only where it reaches this value (EasyOCR keeps a CRAFT box "
        "where the map peaks at 0.7 inside a region above 0.4); unset: every region counts.")
    range_tolerance: float | None = Field(
        0.5, ge=0, description="The gate fails when a build's value leaves the range FP32's "
        "output spans on the dataset, widened by this fraction of the span on each side (a "
        "sigmoid returning -98304); null: no range check.")
    min_top1: float | None = Field(None, ge=0, le=100, description="Top-1 accuracy, percent.")
    min_top5: float | None = Field(None, ge=0, le=100, description="Top-5 accuracy, percent.")
    max_top1_drop: float | None = Field(
        None, ge=0, le=100, description="Top-1 accuracy drop vs the FP32 reference, points."
    )
    min_top1_agreement: float | None = Field(
        None, ge=0, le=100, description="Samples whose top-1 class equals FP32's, percent."
    )
    min_decided_agreement: float | None = Field(
        None, ge=0, le=100, description="Top-1 agreement with FP32 over the samples FP32 "
        "decides: its top-1 minus top-2 output value at least `margin`, percent "
        "(docs/gates.md#decided-agreement).")
    margin: float | None = Field(
        None, gt=0, description="With min_decided_agreement: FP32's least top-1 minus top-2 "
        "gap, in the output's own units (logits: a log-odds gap; probabilities: a "
        "probability gap), for a sample to count.")
    min_cosine: float | None = Field(
        None, ge=-1, le=1, description="Mean per-sample cosine similarity to FP32; a sample "
        "whose outputs are both numerically zero counts as 1 (a blank heat map)."
    )
    max_abs_error: float | None = Field(
        None, ge=0, description="Largest absolute output difference from FP32."
    )
    max_relative_error: float | None = Field(
        None, ge=0, description="Mean per-sample ||out - FP32|| / ||FP32||, the denominator "
        "floored at 1e-3 of the dataset's largest so near-zero samples cannot blow it up."
    )
    min_psnr: float | None = Field(
        None, description="Peak signal-to-noise ratio vs FP32, dB, over the FP32 output's "
        "range (dense maps)."
    )
    min_decision_agreement: float | None = Field(
        None, ge=0, le=100, description="Values on the same side of `threshold` as FP32's, "
        "percent (thresholded decisions: speech / no speech, a mask).")
    min_sequence_match: float | None = Field(
        None, ge=0, le=100, description="Ctc: samples whose greedy-decoded sequence equals "
        "FP32's, percent.")
    max_cer: float | None = Field(
        None, ge=0, description="Ctc: character error rate of the decoded sequences vs "
        "FP32's (edit distance / FP32's length), percent.")
    min_sequence_match_labels: float | None = Field(
        None, ge=0, le=100, description="Ctc, a dataset with labels (class indices a sample, "
        "padded with -1): samples whose decoded sequence equals the label, percent.")
    min_region_recall: float | None = Field(
        None, ge=0, le=100, description="Sparse binary maps: FP32's positive regions "
        "(connected values above `threshold`, reaching `peak_threshold`) the build finds, at "
        "least half of each inside its own, percent (docs/gates.md#sparse-binary-maps).")
    min_region_iou: float | None = Field(
        None, ge=0, le=100, description="Sparse binary maps: IoU of the build's positive "
        "regions with FP32's, per sample (one neither marks is skipped), mean, percent.")
    max_cer_labels: float | None = Field(
        None, ge=0, description="Ctc, a dataset with labels: character error rate of the "
        "decoded sequences vs the labels, percent.")
    boxes: str | None = Field(None, description="Detection: the output of boxes "
                              "`[1, D, 4]` (x1, y1, x2, y2; rows of score 0 are padding).")
    scores: str | None = Field(None, description="Detection: the output of scores `[1, D]`.")
    classes: str | None = Field(None, description="Detection: the output of class indices "
                                "`[1, D]`; without it every box is class 0.")
    min_box_agreement: float | None = Field(
        None, ge=0, le=100, description="Detection: FP32 boxes scoring >= score_threshold that "
        "the build also finds (same class, IoU >= iou_threshold), percent.")
    min_map50: float | None = Field(
        None, ge=0, le=100, description="Detection: mAP at IoU iou_threshold of the build's "
        "detections, FP32's (score >= score_threshold) taken as ground truth, percent.")
    min_score_agreement: float | None = Field(
        None, ge=0, le=100, description="Detection: matched boxes whose score is within "
        "score_tolerance of FP32's, percent.")
    min_map50_labels: float | None = Field(
        None, ge=0, le=100, description="Detection: mAP at IoU iou_threshold of the build's "
        "detections against the dataset's labelled boxes (`labels: {format: yolo | coco, "
        "path}`), percent; FP32's own is reported beside it.")
    max_map50_labels_drop: float | None = Field(
        None, ge=0, le=100, description="Detection: FP32's mAP against the labelled boxes "
        "minus the build's, points.")
    score_threshold: float = Field(0.5, gt=0, lt=1, description="Detection: FP32 boxes "
                                   "scoring at least this are the ones to find.")
    iou_threshold: float = Field(0.5, gt=0, le=1, description="Detection: IoU of a match.")
    score_tolerance: float = Field(0.05, gt=0, le=1, description="Detection: largest score "
                                   "difference of an agreeing match.")
    labels_iou_threshold: float | None = Field(
        None, gt=0, le=1, description="Detection: IoU of a match with a labelled box "
        "(min_map50_labels); default: iou_threshold. Hand-drawn boxes and a model's boxes "
        "follow different conventions, which a lower IoU can forgive.")

    _check_percent = field_validator(
        "min_top1", "min_top5", "min_top1_agreement", "min_decided_agreement",
        "min_box_agreement", "min_map50", "min_score_agreement", "min_map50_labels",
        "min_decision_agreement", "min_sequence_match", "min_sequence_match_labels",
        "min_region_recall", "min_region_iou", mode="after"
    )(_percent)

    @model_validator(mode="after")
    def _something_to_check(self) -> AccuracyGate:
        limits = self.model_dump(exclude={*SELECTION_KEYS, *DETECTION_KEYS})
        if all(v is None for v in limits.values()):
            raise ValueError(f"set at least one limit: {', '.join(limits)}")
        if self.task is AccuracyTask.DETECTION:
            return self._detection_fits()
        wrong = [k for k in (*DETECTION_LIMITS, "boxes", "scores", "classes")
                 if getattr(self, k) is not None]
        wrong += [k for k in DETECTION_KEYS[3:] if k in self.model_fields_set]
        if wrong:
            raise ValueError(f"{', '.join(wrong)} are for detection outputs; add "
                             "`task: detection` or remove them")
        if self.task is not AccuracyTask.CLASSIFICATION:
            wrong = [k for k in CLASS_LIMITS if getattr(self, k) is not None]
            if wrong:
                raise ValueError(
                    f"{', '.join(wrong)} compare class indices, which mean nothing for a "
                    f"{self.task.value} output; use min_cosine, max_abs_error, "
                    "max_relative_error or min_psnr")
        self._sequence_fits()
        return self._selection_fits()

    def _sequence_fits(self) -> None:
        ctc = self.task is AccuracyTask.CTC
        wrong = [k for k in SEQUENCE_LIMITS if getattr(self, k) is not None]
        if wrong and not ctc:
            raise ValueError(f"{', '.join(wrong)} compare decoded sequences: add `task: ctc`")
        if "blank" in self.model_fields_set and not ctc:
            raise ValueError("`blank:` is the CTC blank class: add `task: ctc`")
        if self.trim and not ctc:
            raise ValueError("`trim:` cuts classes off decoded sequences: add `task: ctc`")
        if self.class_axis is not None and self.task not in (AccuracyTask.CLASSIFICATION,
                                                             AccuracyTask.CTC):
            raise ValueError(f"class_axis is for class scores; a {self.task.value} output "
                             "has none")
        if self.class_axis == 0:
            raise ValueError("class_axis 0 is the batch (the samples): name a model axis, "
                             "e.g. -1 for the classes of a [1, T, C] sequence")
        self._decisions_fit()

    def _decisions_fit(self) -> None:
        regions = [k for k in REGION_LIMITS if getattr(self, k) is not None]
        decides = self.min_decision_agreement is not None or regions
        if self.threshold is None and decides:
            raise ValueError(f"{', '.join(regions) or 'min_decision_agreement'} needs "
                             "`threshold:`: the decision is value > threshold (e.g. "
                             "`min_decision_agreement: 99, threshold: 0.5`)")
        if self.threshold is not None and not decides:
            raise ValueError("`threshold:` goes with min_decision_agreement (the decision "
                             "value > threshold) or min_region_recall / min_region_iou (the "
                             "positive region of a sparse map)")
        if regions and self.task not in (AccuracyTask.REGRESSION, AccuracyTask.DENSE):
            raise ValueError(f"{', '.join(regions)} judge the positive region of a map: add "
                             "`task: dense`")
        if self.peak_threshold is not None:
            if not regions:
                raise ValueError("`peak_threshold:` says which regions count: it goes with "
                                 "min_region_recall or min_region_iou")
            assert self.threshold is not None
            if self.peak_threshold <= self.threshold:
                raise ValueError(f"peak_threshold {self.peak_threshold:g} is not above "
                                 f"threshold {self.threshold:g}: every region above the "
                                 "threshold already reaches it (EasyOCR's CRAFT boxes: "
                                 "`threshold: 0.4, peak_threshold: 0.7`)")

    def _selection_fits(self) -> AccuracyGate:
        if (self.margin is None) != (self.min_decided_agreement is None):
            raise ValueError("min_decided_agreement and margin go together: the agreement "
                             "counts the samples where FP32's top-1 leads its top-2 by at "
                             "least margin (e.g. `min_decided_agreement: 99, margin: 0.2`)")
        if self.slice is not None and self.output is None:
            raise ValueError("name the output a slice is of: `output:` beside `slice:`")
        if self.channel_axis == 0:
            raise ValueError("channel_axis 0 is the batch (the samples): name a model axis, "
                             "e.g. 1 for the rows of a [1, 4+C, N] head")
        if (self.channel_axis is not None
                and all(getattr(self, k) is None for k in SCALED_LIMITS)):
            raise ValueError("channel_axis changes min_cosine, max_relative_error and "
                             "min_psnr; this gate sets none of them")
        return self

    def _detection_fits(self) -> AccuracyGate:
        if self.output is not None:
            raise ValueError("a detection gate reads several outputs: name them with "
                             "`boxes:`, `scores:` and `classes:` instead of `output:`")
        if self.boxes is None or self.scores is None:
            raise ValueError("a detection gate needs `boxes:` and `scores:` (and `classes:` "
                             "for a multi-class model): the outputs after NMS")
        named = {"boxes": self.boxes, "scores": self.scores, "classes": self.classes}
        for key, output in named.items():
            others = [k for k, o in named.items() if k != key and o == output]
            if others:
                raise ValueError(f"`{key}:` and `{others[0]}:` both name output '{output}': "
                                 "boxes, scores and classes are three different outputs "
                                 "(N×D×4, N×D and N×D after NMS)")
        wrong = [k for k in (*CLASS_LIMITS, *VALUE_LIMITS, "margin", "slice", "channel_axis",
                             "threshold", "peak_threshold")
                 if getattr(self, k) is not None]
        if wrong:
            raise ValueError(f"{', '.join(wrong)} compare values position by position, which "
                             "means nothing for detections (their order and count change); use "
                             "min_box_agreement, min_map50 or min_score_agreement")
        if all(getattr(self, k) is None for k in DETECTION_LIMITS):
            raise ValueError(f"set at least one limit: {', '.join(DETECTION_LIMITS)}")
        return self

    @property
    def part_label(self) -> str:
        """The slice in NumPy's spelling (`[:, 4:]`), or nothing for the whole output."""
        return self.slice.label if self.slice is not None else ""

    @property
    def checked_outputs(self) -> list[str]:
        """The model outputs this gate reads (empty: the first output)."""
        named = [self.output, self.boxes, self.scores, self.classes]
        return [n for n in named if n is not None]
