"""How far faithful reduced-precision numerics move EfficientNet-Lite0's FP32 top-1 − top-2
logit gap on the packaged photos: the data behind `margin: 0.2` (docs/gates.md).

    python benchmarks/decided_margin.py        (~4 min on 2 cores: bf16 is slow in PyTorch)

Runs quickstart's model in PyTorch on its `photos` and `calibration` datasets (117
photos) in float32, bfloat16 and float16, and prints the FP32 gap distribution, how
much each precision moves the gap, where its flips are, and its decided agreement at
several margins.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

RECIPE = Path(__file__).resolve().parents[1] / "recipes" / "quickstart.yaml"


def main() -> None:
    import torch

    from edgebuild.data.loaders import load_dataset
    from edgebuild.passes.torch_model import build_torch_model
    from edgebuild.recipe.loader import load_recipe

    recipe = load_recipe(RECIPE).recipe
    torch.set_num_threads(2)
    source: dict[str, Any] = recipe.model.model_dump(mode="json")
    images = []
    for name in ("photos", "calibration"):
        samples = load_dataset(recipe.datasets[name], RECIPE.parent,
                               [i.name for i in recipe.inputs], name)
        images += [samples.feed(i)["image"] for i in range(len(samples))]
        print(f"{name}: {len(samples)} photos")
    x = torch.from_numpy(np.concatenate(images))

    def run(dtype: Any) -> np.ndarray:
        model = build_torch_model(source, RECIPE.parent).to(dtype)
        with torch.no_grad():
            return torch.cat([model(x[i:i + 8].to(dtype)).float()
                              for i in range(0, len(x), 8)]).numpy().astype(np.float64)

    ref = run(torch.float32)
    order = np.argsort(ref, axis=1)
    rows = np.arange(len(ref))
    top1, top2 = order[:, -1], order[:, -2]
    gap = ref[rows, top1] - ref[rows, top2]
    print(f"FP32 logits span {ref.min():.2f} … {ref.max():.2f}")
    for m in (0.04, 0.1, 0.2, 0.3, 0.5, 1.0):
        print(f"  FP32 gap < {m}: {int((gap < m).sum())} of {len(gap)}")
    for name, dtype in (("fp16", torch.float16), ("bf16", torch.bfloat16)):
        got = run(dtype)
        moved = np.abs(got[rows, top1] - got[rows, top2] - gap)
        flips = got.argmax(axis=1) != top1
        cosine = np.mean(np.sum(got * ref, 1) / np.linalg.norm(got, axis=1)
                         / np.linalg.norm(ref, axis=1))
        print(f"{name}: cosine {cosine:.5f}, agreement {100 * np.mean(~flips):.1f} %, gap "
              f"moved p50 {np.median(moved):.3f} p95 {np.percentile(moved, 95):.3f} max "
              f"{moved.max():.3f}; flips at FP32 gaps {np.round(np.sort(gap[flips]), 3)}")
        for m in (0.1, 0.2, 0.3, 0.5):
            decided = gap >= m
            print(f"  margin {m}: {decided.sum()} decided, decided agreement "
                  f"{100 * np.mean(~flips[decided]):.1f} %")


if __name__ == "__main__":
    main()
