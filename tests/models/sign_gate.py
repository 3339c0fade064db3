"""A model whose output depends on data-dependent control flow: tracing freezes it."""

import torch


class SignGate(torch.nn.Module):
    """Doubles the features when their sum is positive, negates them otherwise."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear(x)
        if bool(y.sum() > 0):
            return y * 2.0
        return -y


def build() -> torch.nn.Module:
    torch.manual_seed(0)
    return SignGate()
