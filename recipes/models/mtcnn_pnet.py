"""MTCNN's proposal network (P-Net) as a single-scale face detector.

The architecture is facenet-pytorch's `PNet` (MIT licence); the pretrained weights
are the file `facenet_pytorch/data/pnet.pt` inside that wheel (28 KB, a
state_dict), loaded by the recipe with `weights: {package: facenet_pytorch, ...}`.
Only the weights are read: the package's own code (which imports torchvision) is
not imported.

P-Net is fully convolutional: a 12×12 window slides with stride 2 and each cell
gives a face probability and four box offsets (in window sizes). `forward` decodes
them as facenet-pytorch's `generateBoundingBox` + `bbreg` do, into boxes in input
pixels, so the model ends where a YOLO head ends: boxes `[1, N, 4]` (x1, y1, x2, y2)
and class scores `[1, N, 1]`. NMS and the input normalisation `(x - 127.5) / 128`
are added around it by the recipe's `model.prepost`.
"""

import torch
from torch import nn

STRIDE = 2
CELL = 12


class PNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 10, kernel_size=3)
        self.prelu1 = nn.PReLU(10)
        self.pool1 = nn.MaxPool2d(2, 2, ceil_mode=True)
        self.conv2 = nn.Conv2d(10, 16, kernel_size=3)
        self.prelu2 = nn.PReLU(16)
        self.conv3 = nn.Conv2d(16, 32, kernel_size=3)
        self.prelu3 = nn.PReLU(32)
        self.conv4_1 = nn.Conv2d(32, 2, kernel_size=1)
        self.conv4_2 = nn.Conv2d(32, 4, kernel_size=1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.prelu1(self.conv1(x))
        x = self.pool1(x)
        x = self.prelu2(self.conv2(x))
        x = self.prelu3(self.conv3(x))
        prob = torch.softmax(self.conv4_1(x), dim=1)[:, 1:2]  # [1, 1, h, w]: face
        reg = self.conv4_2(x)  # [1, 4, h, w]: x1, y1, x2, y2 offsets in window sizes
        # The grid follows the feature map's size, kept symbolic (no int()): the export
        # then takes any image size, which is what an image pyramid needs.
        h, w = prob.shape[2], prob.shape[3]
        ys = torch.arange(h, dtype=torch.float32).unsqueeze(1).expand(h, w)
        xs = torch.arange(w, dtype=torch.float32).unsqueeze(0).expand(h, w)
        corners = torch.stack([xs, ys, xs + CELL / STRIDE, ys + CELL / STRIDE]) * STRIDE
        boxes = corners.unsqueeze(0) + reg * CELL  # [1, 4, h, w]
        # Channels last, then flattened: the same order as flatten(2).transpose(1, 2),
        # which onnx2tf (TFLite) converts without its last transpose ([1, 4, h*w] out).
        return (boxes.permute(0, 2, 3, 1).reshape(1, -1, 4),  # [1, h*w, 4]
                prob.permute(0, 2, 3, 1).reshape(1, -1, 1))   # [1, h*w, 1]


def build() -> nn.Module:
    """An untrained P-Net; the recipe loads facenet-pytorch's pnet.pt into it."""
    return PNet().eval()
