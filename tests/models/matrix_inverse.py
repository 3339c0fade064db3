"""A model torch.export captures but ExecuTorch cannot lower: torch.linalg.inv exports as
aten.linalg_inv_ex, which is not in the Core ATen opset ExecuTorch's kernels implement."""

import torch


class MatrixInverse(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        m = self.linear(x).reshape(4, 4) + 4.0 * torch.eye(4)
        return torch.linalg.inv(m).reshape(1, 16)


def build() -> torch.nn.Module:
    torch.manual_seed(0)
    return MatrixInverse()
