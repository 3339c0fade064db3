"""A tiny fully convolutional heat-map net: any height and width (exported with dynamic
H/W by the recipe's `dynamic_axes`)."""

from __future__ import annotations

import torch
from torch import nn


def build() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(),
                         nn.Conv2d(8, 1, 3, padding=1), nn.Sigmoid()).eval()
