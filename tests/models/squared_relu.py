"""A novel activation written as a module class (no torch.library op): the custom-op
tests' second way to declare `torch_op:`. Kernels for ONNX Runtime and a decomposition
beside it."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn


class ScaledSquaredReLU(nn.Module):
    """alpha * relu(x)^2: no weights, one float attribute."""

    def __init__(self, alpha: float = 0.5) -> None:
        super().__init__()
        self.alpha = alpha

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.alpha * torch.relu(x) ** 2


class WithWeights(ScaledSquaredReLU):
    def __init__(self) -> None:
        super().__init__()
        self.gain = nn.Parameter(torch.ones(1))


def build(weighted: bool = False) -> nn.Module:
    torch.manual_seed(0)
    activation = WithWeights() if weighted else ScaledSquaredReLU()
    return nn.Sequential(nn.Linear(4, 8), activation, nn.Linear(8, 3)).eval()


def onnxruntime_kernel(x: Any, alpha: float) -> Any:
    import numpy as np

    return (np.float32(alpha) * np.maximum(x, 0) ** 2).astype(np.float32)


def decomposition(g: Any, x: Any, alpha: float) -> Any:
    relu = g.op("Relu", x)
    scale = g.op("Constant", value_t=torch.tensor(alpha, dtype=torch.float32))
    return g.op("Mul", g.op("Mul", relu, relu), scale)
