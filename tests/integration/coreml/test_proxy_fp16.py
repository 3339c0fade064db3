"""The fp16 accuracy proxy (issue 40, item 7): PyTorch's float16 CPU convolution has no
fast kernel on x86 (the Core ML proxy took ~68 s per 800×608 image of CRAFT's VGG16
U-Net), so a traced proxy stores in fp16 and computes in fp32, each layer's output
rounded to fp16 — within one fp16 step of PyTorch's float16 on the same model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from edgebuild.backends.coreml.options import CoreMlOptions
from edgebuild.backends.coreml.proxy import PROXY_FILE, ProxyRunner, save_proxy

TENSORS = [{"name": "image", "shape": [1, 3, 48, 64], "dtype": "float32", "dynamic_axes": {}}]


def net() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.BatchNorm2d(16), torch.nn.ReLU(),
        torch.nn.Conv2d(16, 16, 3, padding=1), torch.nn.Sigmoid()).eval()


def test_the_fp16_proxy_stores_fp16_computes_fp32_and_agrees_with_float16(
        tmp_path: Path) -> None:
    model = net()
    path = save_proxy(model, TENSORS, CoreMlOptions(compute_precision="fp16"), tmp_path)
    assert path.name == PROXY_FILE
    saved = torch.jit.load(str(path))  # type: ignore[no-untyped-call]
    weights = [p for p in saved.parameters()]
    assert {p.dtype for p in weights} == {torch.float32}  # fast CPU kernels
    assert all(torch.equal(p, p.half().float()) for p in weights)  # fp16 values
    image = np.random.default_rng(0).standard_normal((1, 3, 48, 64)).astype(np.float32)
    with ProxyRunner(path, TENSORS, ["y"], None, half=True) as proxy:
        got = proxy.infer({"image": image})["y"]
    with torch.no_grad():
        half = model.half()(torch.from_numpy(image).half()).float().numpy()
    assert float(np.abs(got - half).max()) <= 2 ** -10  # one fp16 step below 1
    assert not np.array_equal(got, model.float()(torch.from_numpy(image)).detach().numpy())
