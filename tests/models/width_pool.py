"""A CRNN-style feature extractor: a width-5 convolution (valid padding: the line must be
at least 5 wide) and AdaptiveAvgPool2d((1, None)) over the height, `[1, 1, 8, W] -> [1, 4, W-4]`.

`build_lstm` reads the columns with an LSTM and a Linear, as EasyOCR's recognizer does
(`[1, 1, 8, W] -> [1, W-4, 5]`), pooling with AdaptiveAvgPool2d((None, 1)) on the permuted
features as it does; `build_lstm_mean` pools with a mean over the height instead."""

import torch


class WidthPool(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(1, 4, (3, 5), padding=(1, 0))
        self.pool = torch.nn.AdaptiveAvgPool2d((1, None))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(self.conv(x)).squeeze(2)


class WidthLstm(torch.nn.Module):
    def __init__(self, mean: bool) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.mean = mean
        self.conv = torch.nn.Conv2d(1, 4, (3, 5), padding=(1, 0))
        self.pool = torch.nn.AdaptiveAvgPool2d((None, 1))
        self.rnn = torch.nn.LSTM(4, 6, batch_first=True)
        self.linear = torch.nn.Linear(6, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        features = self.conv(x).permute(0, 3, 1, 2)  # [1, W-4, 4, 8]
        columns = features.mean(dim=3) if self.mean else self.pool(features).squeeze(3)
        return self.linear(self.rnn(columns)[0])


def build() -> torch.nn.Module:
    return WidthPool().eval()


def build_lstm() -> torch.nn.Module:
    return WidthLstm(mean=False).eval()


def build_lstm_mean() -> torch.nn.Module:
    return WidthLstm(mean=True).eval()
