"""A small YOLOv8-style detector whose raw head mixes pixels and probabilities.

    image 3×320×320 ─ conv s2 ─ conv s2 ─ conv s2 ─┬─ box conv ─ Sigmoid ─ decode ─┐
                                                    └─ cls conv ─ Sigmoid ──────────┴─ Concat
                                                                        [1, 4 + C, 1600]

Rows 0–3 are box centres and sizes in pixels (0–320: centre = (grid + sigmoid) ×
stride, size = sigmoid × 320); rows 4.. are class scores in 0–1. One INT8 scale
for that Concat is ≈ 320 / 255 = 1.25, so every class score rounds to 0 — the case
of issue 31. The weights are seeded and scaled so that the class logits spread
over several units (scores far from a constant 0.5) and nothing cancels: the
result does not depend on the CPU's summation order beyond rounding.
"""

import torch

CLASSES = 3
SIZE = 320
STRIDE = 8


class YoloHead(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.stem = torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3, 2, 1), torch.nn.ReLU(),
            torch.nn.Conv2d(8, 16, 3, 2, 1), torch.nn.ReLU(),
            torch.nn.Conv2d(16, 16, 3, 2, 1), torch.nn.ReLU())
        self.box = torch.nn.Conv2d(16, 4, 1)
        self.cls = torch.nn.Conv2d(16, CLASSES, 1)
        with torch.no_grad():  # class logits over a few units, not all near 0
            self.cls.weight.mul_(4.0)
            self.cls.bias.copy_(torch.tensor([-1.0, 0.0, 1.0][:CLASSES]))
        cells = SIZE // STRIDE
        ys, xs = torch.meshgrid(torch.arange(cells), torch.arange(cells), indexing="ij")
        self.register_buffer("grid", torch.stack([xs, ys]).reshape(1, 2, -1).float())

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        features = self.stem(image)
        box = torch.sigmoid(self.box(features)).flatten(2)            # [1, 4, N]
        centres = (self.grid + box[:, :2]) * STRIDE                   # pixels
        sizes = box[:, 2:] * SIZE                                     # pixels
        scores = torch.sigmoid(self.cls(features)).flatten(2)         # [1, C, N]
        return torch.cat([centres, sizes, scores], dim=1)             # [1, 4 + C, N]


def build() -> torch.nn.Module:
    return YoloHead().eval()
