"""A tiny classifier that flattens its feature map into a Linear layer: exported with
dynamic H/W (the recipe's `dynamic_axes`), yet it can only run at the example size —
the flatten's width is baked into the Linear's weights, and onnx2tf bakes it into a
Reshape. The model a TFLite runner must refuse to resize, with a row, not a traceback."""

from __future__ import annotations

import torch
from torch import nn


def build() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 4, 3, stride=2, padding=1), nn.ReLU(), nn.Flatten(),
                         nn.Linear(4 * 16 * 24, 10)).eval()
