"""Train the row-attention classifier of recipes/custom-op-attention.yaml.

The custom op's gates compare every backend with PyTorch, which needs no
training; the weights are trained anyway so the recipe also gates a real
task accuracy on the Fashion-MNIST test set (Debian package
`dataset-fashion-mnist`, read with train_fashion_mnist.py's IDX readers).
Training runs the custom op's PyTorch implementation, autograd through it.

Deterministic (fixed seed, 2 threads). The shipped checkpoint: 10 epochs,
82.5 % test accuracy, 20 s to 3 minutes on 2 CPU cores (depending on the load)::

    python recipes/models/train_window_attention.py --epochs 10
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from train_fashion_mnist import DATA_DIR, read_idx_images, read_idx_labels
from window_attention import build

MEAN, STD = 0.2860, 0.3530
DEFAULT_OUT = Path(__file__).resolve().parent / "window_attention.pt"


def _load(split: str) -> tuple[torch.Tensor, torch.Tensor]:
    images = read_idx_images(DATA_DIR / f"{split}-images-idx3-ubyte.gz")
    labels = read_idx_labels(DATA_DIR / f"{split}-labels-idx1-ubyte.gz")
    x = (images.astype(np.float32) / 255.0 - MEAN) / STD
    return torch.from_numpy(x[:, None]), torch.from_numpy(labels.astype(np.int64))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(2)
    x, y = _load("train")
    x_test, y_test = _load("t10k")
    model = build().train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    loss_fn = nn.CrossEntropyLoss()
    started = time.perf_counter()
    for epoch in range(args.epochs):
        order = torch.randperm(len(x))
        for start in range(0, len(x), 128):
            batch = order[start:start + 128]
            optimizer.zero_grad()
            loss_fn(model(x[batch]), y[batch]).backward()
            optimizer.step()
        model.eval()
        with torch.no_grad():
            accuracy = (model(x_test).argmax(1) == y_test).float().mean().item() * 100
        model.train()
        print(f"epoch {epoch + 1}: test accuracy {accuracy:.2f} % "
              f"({time.perf_counter() - started:.0f} s)")
    torch.save(model.eval().state_dict(), args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
