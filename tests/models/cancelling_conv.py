"""A layer XNNPACK refuses once quantized to int8: a huge weight on a dead channel.

The 1×1 convolution sees two channels, x and x − x (exactly 0 for every finite x).
Channel 0 of its output weighs the dead channel by ``BIG`` and x by 0, so it is
exactly 0 on every input, and calibration gives the layer's output a range no wider
than channel 1's (x itself), while channel 0's weights need a scale of big/127.
Input scale × kernel scale / output scale is then ≈ big/127 ≈ 790, beyond XNNPACK's
limit of 256; TFLite's builtin kernels compute it. Real models get there with dead
channels.

Every product here is exact (x·1, x·0, BIG·0), so the output does not depend on the
CPU's summation order or on FMA: an earlier version computed big·x − big·x, whose
rounding differed on an Intel AMX machine (issue 27).
"""

import torch

BIG = 1.0e5


class CancellingConv(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(2, 2, 1, bias=False)
        with torch.no_grad():
            self.conv.weight.zero_()
            self.conv.weight[0, 1] = BIG
            self.conv.weight[1, 0] = 1.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(torch.cat([x, x - x], dim=1))


def build() -> torch.nn.Module:
    return CancellingConv().eval()
