"""A row-attention classifier for Fashion-MNIST built around a custom op.

`local_window_attention` is the kind of layer a research team writes and no
inference framework ships: scaled dot-product attention where each token sees
only the tokens within `window` positions of it (a banded mask). It is a
`torch.library.custom_op`, so PyTorch treats it as one opaque op, as it would
a fused CUDA kernel, and the ONNX exporter has no translation for it: the recipe
recipes/custom-op-attention.yaml declares it, and recipes/models/
window_attention_kernels.py gives its ONNX Runtime kernel, OpenVINO conversion
and the decomposition the TFLite build uses.

The model reads each 28-pixel image row as a token: N x 1 x 28 x 28 -> 28 tokens
of 28 values -> a 32-wide embedding -> local attention (window 2) with a
residual -> mean over tokens -> 10 logits (5.5 k parameters). Weights are trained
by train_window_attention.py (window_attention.pt, 82.5 % test accuracy).
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

WINDOW = 2
DIM = 32


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, window: int) -> torch.Tensor:
    """softmax(q k^T / sqrt(d), masked to |i - j| <= window) v, over N x L x D tensors."""
    length = q.shape[-2]
    position = torch.arange(length, device=q.device)
    band = (position[:, None] - position[None, :]).abs() <= window
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(~band, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


@torch.library.custom_op("edgebuild_demo::local_window_attention", mutates_args=())
def local_window_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                           window: int) -> torch.Tensor:
    """Local-window attention as one opaque op (as a fused kernel would be)."""
    return _attend(q, k, v, window)


@local_window_attention.register_fake
def _(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, window: int) -> torch.Tensor:
    return torch.empty_like(q)


def _save(ctx: Any, inputs: tuple[Any, ...], output: torch.Tensor) -> None:
    q, k, v, window = inputs
    ctx.save_for_backward(q, k, v)
    ctx.window = window


def _backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
    # The gradient of the reference implementation: a fused kernel's backward would be
    # its own op; training here only needs it to be right.
    q, k, v = ctx.saved_tensors
    _, vjp = torch.func.vjp(lambda a, b, c: _attend(a, b, c, ctx.window), q, k, v)
    return (*vjp(grad), None)


local_window_attention.register_autograd(_backward, setup_context=_save)


class RowAttentionNet(nn.Module):
    def __init__(self, dim: int = DIM, window: int = WINDOW, classes: int = 10) -> None:
        super().__init__()
        self.window = window
        self.embed = nn.Linear(28, dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.mix = nn.Linear(dim, dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        tokens = torch.relu(self.embed(image.flatten(1, 2)))  # N x 28 rows x dim
        q, k, v = self.qkv(tokens).chunk(3, dim=-1)
        tokens = tokens + self.mix(local_window_attention(q, k, v, self.window))
        return self.head(torch.relu(tokens).mean(dim=1))


def build() -> nn.Module:
    """Return an untrained RowAttentionNet in eval mode."""
    return RowAttentionNet().eval()
