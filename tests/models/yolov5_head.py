"""A small YOLOv5-style detector: one head `[1, N, 5 + C]` with objectness, boxes as
fractions of the input.

    image 3×320×320 ─ conv s2 ×3 ─┬─ box conv ─ Sigmoid ─ decode ─┐
                                  ├─ obj conv ─ Sigmoid ───────────┼─ Concat ─ Transpose
                                  └─ cls conv ─ Sigmoid ───────────┘   [1, 1600, 5 + C]

Columns 0–3 are box centres and sizes as fractions of the 320-pixel input (centre =
(grid + sigmoid) × stride / 320, size = sigmoid / 2), column 4 the objectness and the
rest the class scores; the score of a class is objectness × class score (`head:
yolov5, normalized: true`). Seeded weights; the objectness and class weights are scaled
by 40 so that scores spread (0.2–0.6) instead of all sitting near 0.35.
"""

import torch

CLASSES = 3
SIZE = 320
STRIDE = 8


class Yolov5Head(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(1)
        self.stem = torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3, 2, 1), torch.nn.ReLU(),
            torch.nn.Conv2d(8, 16, 3, 2, 1), torch.nn.ReLU(),
            torch.nn.Conv2d(16, 16, 3, 2, 1), torch.nn.ReLU())
        self.box = torch.nn.Conv2d(16, 4, 1)
        self.obj = torch.nn.Conv2d(16, 1, 1)
        self.cls = torch.nn.Conv2d(16, CLASSES, 1)
        with torch.no_grad():
            self.obj.weight.mul_(40.0)
            self.obj.bias.fill_(0.0)
            self.cls.weight.mul_(40.0)
        cells = SIZE // STRIDE
        ys, xs = torch.meshgrid(torch.arange(cells), torch.arange(cells), indexing="ij")
        self.register_buffer("grid", torch.stack([xs, ys]).reshape(1, 2, -1).float())

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        features = self.stem(image)
        box = torch.sigmoid(self.box(features)).flatten(2)            # [1, 4, N]
        centres = (self.grid + box[:, :2]) * (STRIDE / SIZE)          # fractions
        sizes = box[:, 2:] * 0.5                                      # fractions
        obj = torch.sigmoid(self.obj(features)).flatten(2)            # [1, 1, N]
        scores = torch.sigmoid(self.cls(features)).flatten(2)         # [1, C, N]
        return torch.cat([centres, sizes, obj, scores], dim=1).transpose(1, 2)


def build() -> torch.nn.Module:
    return Yolov5Head().eval()
