"""A bag of token embeddings: int64 token ids `[1, 8]` in, 4 scores out (an embedding,
the mean over the sequence, a linear head; seeded). The smallest model whose input a
converter narrows (LiteRT-Torch makes int64 ids int32), for tests of integer inputs."""

from __future__ import annotations

from typing import Any

import numpy as np

VOCABULARY, WIDTH, LENGTH = 100, 16, 8


def build() -> Any:
    import torch
    from torch import nn

    class TokenBag(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(VOCABULARY, WIDTH)
            self.head = nn.Linear(WIDTH, 4)

        def forward(self, ids: Any) -> Any:
            return self.head(self.embed(ids).mean(dim=1))

    torch.manual_seed(0)
    return TokenBag().eval()


def tokens(count: int = 32) -> dict[str, np.ndarray]:
    """A callable dataset: `count` rows of token ids."""
    rng = np.random.default_rng(1)
    return {"ids": rng.integers(0, VOCABULARY, (count, LENGTH), dtype=np.int64)}
