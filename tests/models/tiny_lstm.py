"""A one-layer LSTM tagger `[1, 10, 8] -> [1, 10, 5]`: the recurrent op torch.export
captures as `aten.lstm.input`, which coremltools 9 cannot convert (it converts traced)."""

import torch


class Tagger(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.lstm = torch.nn.LSTM(8, 16, batch_first=True)
        self.head = torch.nn.Linear(16, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        steps, _ = self.lstm(x)
        return self.head(steps)


def build() -> torch.nn.Module:
    return Tagger().eval()
