"""A CRNN-style feature extractor: a width-5 convolution (valid padding: the line must be
at least 5 wide) and AdaptiveAvgPool2d((1, None)) over the height, `[1, 1, 8, W] -> [1, 4, W-4]`."""

import torch


class WidthPool(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(1, 4, (3, 5), padding=(1, 0))
        self.pool = torch.nn.AdaptiveAvgPool2d((1, None))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(self.conv(x)).squeeze(2)


def build() -> torch.nn.Module:
    return WidthPool().eval()
