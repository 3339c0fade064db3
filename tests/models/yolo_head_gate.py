"""A YOLOv8-style single-head detector: `[1, 4+C, N]`, box pixels stacked on sigmoid scores.

Input 1×3×320×320 (RGB in 0..1); an 8×8 grid of 40-pixel cells, so N = 64 anchors.
Rows 0–3 are each cell's box centre x, y and width, height in input pixels (0–320),
rows 4.. the C class scores after a sigmoid (0–1): the layout of an Ultralytics
export, whose Concat is where one INT8 scale for both ranges zeroes every score
(issue 31). The weights are set, not random: every value is a small sum of O(1)
terms pushed through a sigmoid, so the outputs do not depend on the CPU's summation
order beyond float rounding.
"""

import torch

CLASSES = 3
SIZE = 320
GRID = 8
STRIDE = SIZE // GRID


class YoloHead(torch.nn.Module):
    def __init__(self, classes: int = CLASSES) -> None:
        super().__init__()
        self.pool = torch.nn.AvgPool2d(STRIDE)
        self.features = torch.nn.Conv2d(3, 8, 1)
        self.head = torch.nn.Conv2d(8, 4 + classes, 1)
        with torch.no_grad():
            generator = torch.Generator().manual_seed(0)
            for conv in (self.features, self.head):
                conv.weight.copy_(torch.rand(conv.weight.shape, generator=generator) * 2 - 1)
                conv.bias.copy_(torch.rand(conv.bias.shape, generator=generator) - 0.5)
        ys, xs = torch.meshgrid(torch.arange(GRID), torch.arange(GRID), indexing="ij")
        self.register_buffer("cells", torch.stack([xs, ys]).reshape(1, 2, -1).float())

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        raw = self.head(torch.relu(self.features(self.pool(image)))).flatten(2)
        centres = (self.cells + torch.sigmoid(raw[:, :2])) * STRIDE  # pixels 0..320
        sizes = torch.sigmoid(raw[:, 2:4]) * SIZE  # pixels 0..320
        scores = torch.sigmoid(raw[:, 4:] * 4)
        return torch.cat([centres, sizes, scores], dim=1)


def build() -> torch.nn.Module:
    return YoloHead().eval()


def photos(count: int = 4, seed: int = 0) -> "torch.Tensor":
    """Dark images with one bright rectangle each, as 1×3×320×320 RGB in 0..1."""
    generator = torch.Generator().manual_seed(seed)
    images = torch.full((count, 3, SIZE, SIZE), 0.1)
    for i in range(count):
        x, y = (int(v) for v in torch.randint(0, SIZE - 120, (2,), generator=generator))
        colour = torch.rand(3, 1, 1, generator=generator)
        images[i, :, y:y + 120, x:x + 120] = colour
    return images
