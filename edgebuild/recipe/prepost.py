"""`model.prepost`: pre- and post-processing built into the model itself.

Schema only; the PyTorch wrapper is `edgebuild/frontend/prepost_torch.py`. The wrapper
goes around the source model before anything else sees it, so the FP32 reference
(PyTorch), the exported ONNX and every backend's artifact all take raw pixels and
return detections after NMS, and the gates check exactly what is deployed.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import Field, model_validator

from edgebuild.recipe.common import Strict


class InputPrep(Strict):
    """Raw uint8 image in, `(pixel * scale - mean) / std` in NCHW float32 to the model."""

    layout: Literal["NHWC", "NCHW"] = Field(
        "NHWC", description="Layout of the raw uint8 input (the model gets NCHW).")
    scale: float = Field(1.0, description="Multiplies raw pixel values (0..255) first.")
    mean: list[float] = Field(default_factory=lambda: [0.0], min_length=1)
    std: list[float] = Field(default_factory=lambda: [1.0], min_length=1)

    @model_validator(mode="after")
    def _std_not_zero(self) -> InputPrep:
        if any(s == 0 for s in self.std):
            raise ValueError("std must not contain 0")
        return self


class Head(StrEnum):
    """How a detector's raw output holds its boxes and scores (`detection.head`)."""

    BOXES_SCORES = "boxes_scores"  # two outputs: boxes [1, N, 4], scores [1, N, C]
    YOLOV8 = "yolov8"  # one output [1, 4 + C, N]: box rows, then per-class scores (v8+)
    YOLOV5 = "yolov5"  # one output [1, N, 5 + C]: box, objectness, class scores (v5, v7)
    GFL = "gfl"  # per-stride class scores + box distributions (PP-PicoDet, NanoDet: DFL)


class DetectionPost(Strict):
    """Boxes and class scores in, the best detections after NMS out, padded to a fixed count.

    Outputs (batch 1): boxes `[1, max_detections, 4]` (x1, y1, x2, y2 in input pixels),
    scores `[1, max_detections]`, classes `[1, max_detections]` (float); rows past the
    detections found have score 0 and class -1. NMS is per class (boxes of different
    classes never suppress each other) and exports as ONNX `NonMaxSuppression`.
    """

    head: Head = Field(Head.BOXES_SCORES, description="Layout of the raw head: "
                       "`boxes_scores` (two outputs, `boxes` and `scores`), `yolov8` (one "
                       "output `[1, 4 + C, N]`, per-class scores, no objectness) or `yolov5` "
                       "(one output `[1, N, 5 + C]`; score = objectness x class score) or "
                       "`gfl` (PP-PicoDet, NanoDet: class scores and box-side distributions "
                       "over `reg_max + 1` bins per anchor point of each stride; give "
                       "`strides`).")
    output: int | None = Field(None, ge=0, description="Index of the model output holding "
                               "a single head (`yolov8`, `yolov5`); default 0.")
    boxes: int | None = Field(None, ge=0, description="Index of the model output holding "
                              "the boxes `[1, N, 4]` (`head: boxes_scores`); default 0.")
    scores: int | None = Field(None, ge=0, description="Index of the model output holding "
                               "the class scores `[1, N, classes]` (probabilities, not "
                               "logits; `head: boxes_scores`); default 1.")
    box_format: Literal["xyxy", "cxcywh"] | None = Field(
        None, description="`xyxy` corners or `cxcywh` centre and size; default `cxcywh` "
        "for the YOLO heads, `xyxy` for `boxes_scores`.")
    strides: list[int] | None = Field(None, min_length=1, description="`head: gfl`: the "
                                      "feature strides in the file's order, e.g. `[8, 16, "
                                      "32, 64]` (PP-PicoDet) or `[8, 16, 32]` (NanoDet).")
    reg_max: int = Field(7, ge=1, le=64, description="`head: gfl`: a box side is a "
                         "distribution over `reg_max + 1` bins of one stride each.")
    grid_offset: float = Field(0.5, ge=0, le=1, description="`head: gfl`: anchor points sit "
                               "at `(column + grid_offset) x stride` (PP-PicoDet 0.5, "
                               "NanoDet 0).")
    normalized: bool = Field(False, description="Box coordinates are fractions of the "
                             "model input's width and height (0..1), not pixels.")
    iou_threshold: float = Field(0.5, gt=0, le=1, description="NMS suppresses a box whose "
                                 "IoU with a better one of its class exceeds this.")
    score_threshold: float = Field(0.25, ge=0, lt=1, description="Boxes scoring at most "
                                   "this are dropped before NMS.")
    max_detections: int = Field(100, ge=1, le=10000, description="Detections kept per image "
                                "(the fixed first dimension of every output).")

    @model_validator(mode="after")
    def _consistent(self) -> DetectionPost:
        if (self.head is Head.GFL) != (self.strides is not None):
            raise ValueError("`strides` belongs to `head: gfl`, which needs it" if
                             self.strides is not None else "`head: gfl` needs `strides`, the "
                             "feature strides in the file's order (e.g. [8, 16, 32, 64])")
        if self.head is Head.GFL:
            given = [k for k in ("output", "boxes", "scores", "box_format")
                     if getattr(self, k) is not None] + (["normalized"] if self.normalized
                                                          else [])
            if given:
                raise ValueError(f"`head: gfl` reads every output of the file (the scores, "
                                 f"then the box distributions, per stride; or one output "
                                 f"with both) and decodes corners in pixels: drop "
                                 f"{', '.join(f'`{g}`' for g in given)}")
            return self
        if self.head is Head.BOXES_SCORES:
            if self.output is not None:
                raise ValueError("`output` names a single head (`head: yolov8` or `yolov5`); "
                                 "with `head: boxes_scores` give `boxes` and `scores`")
            boxes, scores = self.model_outputs
            if boxes == scores:
                raise ValueError("boxes and scores name the same model output")
        else:
            given = [k for k in ("boxes", "scores") if getattr(self, k) is not None]
            if given:
                raise ValueError(f"`head: {self.head.value}` is one output: give `output` "
                                 f"(its index), not {' and '.join(f'`{g}`' for g in given)}")
        return self

    @property
    def corners(self) -> bool:
        """Boxes come as x1, y1, x2, y2 (else centre and size)."""
        if self.head is Head.GFL:
            return True
        fmt = self.box_format or ("xyxy" if self.head is Head.BOXES_SCORES else "cxcywh")
        return fmt == "xyxy"

    @property
    def model_outputs(self) -> tuple[int, ...]:
        """The indices of the model outputs this reads (`gfl`: at least output 0; it reads
        them all, see `gfl_priors`)."""
        if self.head is Head.BOXES_SCORES:  # (boxes, scores)
            return (0 if self.boxes is None else self.boxes,
                    1 if self.scores is None else self.scores)
        return (self.output or 0,)


def gfl_priors(strides: list[int], height: int, width: int, offset: float
               ) -> tuple[Any, Any]:
    """A GFL head's anchor points, in the order the heads list them (stride by stride,
    row-major): centres `[N, 4]` as (x, y, x, y) pixels and each point's stride `[N, 1]`.
    A feature map is `ceil(size / stride)` points each way, as PaddleDetection pads."""
    import numpy as np

    centres, scale = [], []
    for stride in strides:
        rows, cols = -(-height // stride), -(-width // stride)
        y, x = np.meshgrid((np.arange(rows) + offset) * stride,
                           (np.arange(cols) + offset) * stride, indexing="ij")
        centres.append(np.stack([x.ravel(), y.ravel()] * 2, axis=1))
        scale.append(np.full((rows * cols, 1), stride))
    return (np.concatenate(centres).astype(np.float32),
            np.concatenate(scale).astype(np.float32))


class PrePost(Strict):
    """What `model.prepost` adds around the source model (docs/passes.md, prepost)."""

    input: InputPrep | None = Field(None, description="Normalisation folded into the graph.")
    detection: DetectionPost | None = Field(None, description="Box decoding and NMS.")

    @model_validator(mode="after")
    def _something(self) -> PrePost:
        if self.input is None and self.detection is None:
            raise ValueError("prepost adds nothing: give `input`, `detection` or both")
        return self
