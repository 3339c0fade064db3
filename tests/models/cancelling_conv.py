"""A layer XNNPACK refuses once quantized to int8: two weights that cancel.

Channel 0 of the 1×1 convolution computes big·x − big·x = 0 on every input, so
calibration gives the layer's output a range no wider than channel 1's (x itself),
while channel 0's weights need a scale of big/127. Input scale × kernel scale /
output scale is then ≈ big/127 ≈ 790, beyond XNNPACK's limit of 256; TFLite's builtin
kernels compute it. Real models get there with dead or cancelling channels.
"""

import torch

BIG = 1.0e5


class CancellingConv(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(2, 2, 1, bias=False)
        with torch.no_grad():
            self.conv.weight.zero_()
            self.conv.weight[0, 0] = BIG
            self.conv.weight[0, 1] = -BIG
            self.conv.weight[1, 0] = 1.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(torch.cat([x, x], dim=1))


def build() -> torch.nn.Module:
    return CancellingConv().eval()
