"""Small, edge-friendly CNN for Fashion-MNIST (28x28 greyscale, 10 classes).

Input: float32 tensor of shape N x 1 x 28 x 28, normalised as
``(pixel / 255 - MEAN) / STD``. Output: N x 10 logits.

Only Conv2d, BatchNorm2d, ReLU, MaxPool2d, flatten and Linear are used, so the
model exports cleanly to ONNX opsets 13-17. The trained weights live beside this
file in ``fashion_mnist_cnn.pt`` (produced by ``train_fashion_mnist.py``).

The layout is chosen so that static INT8 (QDQ) actually pays off on a CPU:
141 k parameters (0.57 MB fp32) and about 14.5 M multiply-accumulates per image,
almost all of them in 3x3 convolutions with 32-128 channels at 14x14 and 7x7,
where int8 GEMM kernels beat fp32. The stem is a stride-2 convolution rather than
a full-resolution one: a 1-input-channel convolution at 28x28 is dominated by
per-op overhead and runs slower in int8 than in fp32.
"""

import torch
from torch import nn

MEAN: float = 0.2860
STD: float = 0.3530
NUM_CLASSES: int = 10


def _block(c_in: int, c_out: int, stride: int = 1) -> list[nn.Module]:
    return [
        nn.Conv2d(c_in, c_out, kernel_size=3, stride=stride, padding=1, bias=False),
        nn.BatchNorm2d(c_out),
        nn.ReLU(inplace=True),
    ]


class FashionCNN(nn.Module):
    """Stride-2 stem (32), two 64-channel convs, one 128-channel conv, linear classifier."""

    def __init__(self, num_classes: int = NUM_CLASSES) -> None:
        super().__init__()
        self.features = nn.Sequential(
            *_block(1, 32, stride=2),  # 28 -> 14
            *_block(32, 64),
            *_block(64, 64),
            nn.MaxPool2d(2),  # 14 -> 7
            *_block(64, 128),
            nn.MaxPool2d(2),  # 7 -> 3
        )
        self.dropout = nn.Dropout(0.25)
        self.classifier = nn.Linear(128 * 3 * 3, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.features(x)
        x = torch.flatten(x, 1)
        x = self.dropout(x)
        return self.classifier(x)


def build() -> nn.Module:
    """Return an untrained FashionCNN in eval mode."""
    return FashionCNN().eval()
