"""The PyTorch side of `model.prepost`: a module around the source model.

    raw uint8 image ──▶ float, NCHW, (x·scale − mean)/std ──▶ model ──▶ boxes, scores
        ──▶ best class per box ──▶ NMS per class ──▶ top max_detections, padded

In PyTorch (the FP32 reference) NMS is a plain greedy loop; exported with the legacy
exporter it becomes one ONNX `NonMaxSuppression` node (the autograd Function's
`symbolic`), so the reference checks the exported graph's NMS rather than sharing it.
Padding is a concatenation with a constant block followed by a constant slice, so
the traced graph keeps no detection count from the export example.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from edgebuild.recipe.prepost import DetectionPost, Head, InputPrep, PrePost


def greedy_nms(boxes: torch.Tensor, scores: torch.Tensor, iou_threshold: float,
               score_threshold: float, max_detections: int) -> torch.Tensor:
    """Indices of the kept boxes, best first: ONNX NonMaxSuppression's semantics (a box
    is dropped when its score is not above `score_threshold`, or when its IoU with a kept
    box is above `iou_threshold`)."""
    order = torch.argsort(scores, descending=True, stable=True)
    order = order[scores[order] > score_threshold]
    low = torch.minimum(boxes[:, :2], boxes[:, 2:])
    high = torch.maximum(boxes[:, :2], boxes[:, 2:])
    x1, y1, x2, y2 = low[:, 0], low[:, 1], high[:, 0], high[:, 1]
    area = (x2 - x1) * (y2 - y1)
    keep: list[int] = []
    for index in order.tolist():
        if len(keep) >= max_detections:
            break
        if keep:
            kept = torch.tensor(keep)
            w = (torch.minimum(x2[kept], x2[index])
                 - torch.maximum(x1[kept], x1[index])).clamp(min=0)
            h = (torch.minimum(y2[kept], y2[index])
                 - torch.maximum(y1[kept], y1[index])).clamp(min=0)
            inter = w * h
            union = area[kept] + area[index] - inter
            iou = torch.where(union > 0, inter / union, torch.zeros_like(inter))
            if bool((iou > iou_threshold).any()):
                continue
        keep.append(index)
    return torch.tensor(keep, dtype=torch.int64)


class _NMS(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, boxes: torch.Tensor, scores: torch.Tensor, iou: float,
                threshold: float, max_detections: int) -> torch.Tensor:
        return greedy_nms(boxes, scores, iou, threshold, max_detections)

    @staticmethod
    def symbolic(g: Any, boxes: Any, scores: Any, iou: float, threshold: float,
                 max_detections: int) -> Any:
        def const(values: Any, dtype: torch.dtype) -> Any:
            return g.op("Constant", value_t=torch.tensor(values, dtype=dtype))

        batched = g.op("Reshape", boxes, const([1, -1, 4], torch.int64))
        per_class = g.op("Reshape", scores, const([1, 1, -1], torch.int64))
        selected = g.op("NonMaxSuppression", batched, per_class,
                        const([max_detections], torch.int64), const([iou], torch.float32),
                        const([threshold], torch.float32), center_point_box_i=0)
        index = g.op("Gather", selected, const(2, torch.int64), axis_i=1)
        index.setType(index.type().with_dtype(torch.int64).with_sizes([None]))
        return index


def split_head(outputs: list[torch.Tensor], spec: DetectionPost, size: tuple[int, int]
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """Boxes `[N, 4]` and class scores `[N, C]` from the model's raw outputs (batch 1);
    `size` is the model input's (height, width)."""
    if spec.head is Head.GFL:
        return gfl_decode(outputs, spec, size)
    if spec.head is Head.BOXES_SCORES:
        boxes, scores = (outputs[i] for i in spec.model_outputs)
        return boxes.reshape(-1, 4), scores.reshape(-1, scores.shape[-1])
    head = outputs[spec.model_outputs[0]]
    if spec.head is Head.YOLOV8:  # [1, 4 + C, N]
        rows = head.reshape(head.shape[-2], -1).transpose(0, 1)
        return rows[:, :4], rows[:, 4:]
    rows = head.reshape(-1, head.shape[-1])  # YOLOV5: [1, N, 5 + C]
    return rows[:, :4], rows[:, 4:5] * rows[:, 5:]


def gfl_decode(outputs: list[torch.Tensor], spec: DetectionPost, size: tuple[int, int]
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """A GFL head (PP-PicoDet, NanoDet) decoded as `prepost_onnx._gfl` does: corners in
    pixels from the expectation of each side's distribution, and the class scores."""
    from edgebuild.recipe.prepost import gfl_priors

    strides, bins = spec.strides or [], spec.reg_max + 1
    centres, scale = (torch.from_numpy(a) for a in
                      gfl_priors(strides, size[0], size[1], spec.grid_offset))
    if len(outputs) == 2 * len(strides):
        scores = torch.cat([o.reshape(-1, o.shape[-1]) for o in outputs[:len(strides)]])
        dists = torch.cat([o.reshape(-1, 4 * bins) for o in outputs[len(strides):]])
    elif len(outputs) == 1:
        rows = outputs[0].reshape(-1, outputs[0].shape[-1])
        scores, dists = rows[:, :-4 * bins], rows[:, -4 * bins:]
    else:
        raise ValueError(f"`head: gfl` reads {2 * len(strides)} outputs (or one combined), "
                         f"but the model returns {len(outputs)}")
    if len(scores) != len(centres):
        raise ValueError(f"`head: gfl`: the model gives {len(scores)} anchor points, the "
                         f"strides {strides} on a {size[0]}x{size[1]} input {len(centres)}")
    expect = dists.reshape(-1, bins).softmax(dim=1) @ torch.arange(bins, dtype=dists.dtype)
    sides = expect.reshape(-1, 4) * scale * torch.tensor([-1.0, -1.0, 1.0, 1.0])
    return centres + sides, scores


class PrePostModel(nn.Module):
    """The source model with `model.prepost` around it."""

    mean: torch.Tensor
    std: torch.Tensor

    def __init__(self, model: nn.Module, spec: PrePost) -> None:
        super().__init__()
        self.model = model
        self.input_spec: InputPrep | None = spec.input
        self.detection: DetectionPost | None = spec.detection
        if spec.input is not None:
            self.register_buffer("mean", torch.tensor(spec.input.mean).view(1, -1, 1, 1))
            self.register_buffer("std", torch.tensor(spec.input.std).view(1, -1, 1, 1))

    def forward(self, image: torch.Tensor) -> Any:
        x = image
        if self.input_spec is not None:
            x = image.to(torch.float32)
            if self.input_spec.layout == "NHWC":
                x = x.permute(0, 3, 1, 2)
            if self.input_spec.scale != 1.0:  # a Mul by 1 stays in the graph otherwise
                x = x * self.input_spec.scale
            x = (x - self.mean) / self.std
        outputs = self.model(x)
        if self.detection is None:
            return outputs
        return self._detections(list(outputs) if isinstance(outputs, tuple | list)
                                else [outputs], (x.shape[-2], x.shape[-1]))

    def _detections(self, outputs: list[torch.Tensor], size: tuple[int, int]
                    ) -> tuple[torch.Tensor, ...]:
        spec = self.detection
        assert spec is not None
        if max(spec.model_outputs) >= len(outputs):
            raise ValueError(f"model.prepost.detection names output {max(spec.model_outputs)}"
                             f" but the model returns {len(outputs)} output(s)")
        boxes, scores = split_head(outputs, spec, size)
        if spec.normalized:  # fractions of the model input -> its pixels
            height, width = size
            boxes = boxes * torch.tensor([width, height, width, height], dtype=boxes.dtype)
        if not spec.corners:
            cx, cy, w, h = boxes.unbind(-1)
            boxes = torch.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], dim=-1)
        best, classes = scores.max(dim=1)
        # Per-class NMS as one NMS: boxes of class k are moved k·(largest coordinate + 1)
        # away, so boxes of different classes never overlap (torchvision's batched_nms).
        shifted = boxes + (classes.to(boxes.dtype) * (boxes.max() + 1)).unsqueeze(1)
        keep = _NMS.apply(shifted, best, spec.iou_threshold, spec.score_threshold,
                          spec.max_detections)  # type: ignore[no-untyped-call]
        n = spec.max_detections
        kept_boxes = torch.cat([boxes[keep], torch.zeros(n, 4)])[:n]
        kept_scores = torch.cat([best[keep], torch.zeros(n)])[:n]
        kept_classes = torch.cat([classes[keep].to(torch.float32), torch.full((n,), -1.0)])[:n]
        return kept_boxes.unsqueeze(0), kept_scores.unsqueeze(0), kept_classes.unsqueeze(0)


def wrap(model: nn.Module, spec: PrePost) -> nn.Module:
    return PrePostModel(model, spec).eval()
