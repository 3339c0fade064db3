"""Small, edge-friendly CNN for Fashion-MNIST (28x28 greyscale, 10 classes).

Input: float32 tensor of shape N x 1 x 28 x 28, normalised as
``(pixel / 255 - MEAN) / STD``. Output: N x 10 logits.

Only Conv2d, BatchNorm2d, ReLU, MaxPool2d, flatten and Linear are used, so the
model exports cleanly to ONNX opsets 13-17. The trained weights live beside this
file in ``fashion_mnist_cnn.pt`` (produced by ``train_fashion_mnist.py``).
"""

import torch
from torch import nn

MEAN: float = 0.2860
STD: float = 0.3530
NUM_CLASSES: int = 10


def _block(c_in: int, c_out: int) -> list[nn.Module]:
    return [
        nn.Conv2d(c_in, c_out, kernel_size=3, padding=1, bias=False),
        nn.BatchNorm2d(c_out),
        nn.ReLU(inplace=True),
    ]


class FashionCNN(nn.Module):
    """Three conv blocks (16/32/64 channels) and a linear classifier."""

    def __init__(self, num_classes: int = NUM_CLASSES) -> None:
        super().__init__()
        self.features = nn.Sequential(
            *_block(1, 16),
            nn.MaxPool2d(2),  # 28 -> 14
            *_block(16, 32),
            nn.MaxPool2d(2),  # 14 -> 7
            *_block(32, 64),
            nn.MaxPool2d(2),  # 7 -> 3
        )
        self.dropout = nn.Dropout(0.25)
        self.classifier = nn.Linear(64 * 3 * 3, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.features(x)
        x = torch.flatten(x, 1)
        x = self.dropout(x)
        return self.classifier(x)


def build() -> nn.Module:
    """Return an untrained FashionCNN in eval mode."""
    return FashionCNN().eval()
