"""LiteRT-Torch's bias correction (backends/litert_torch/bias.py): the shift ai-edge-
quantizer's int8 scheme gives a conv, measured in ExecuTorch's PT2E twin and absorbed by
the BatchNorm after it in the *float* model. Checked against the shift computed by hand.
Needs ExecuTorch's quantizer only (no LiteRT-Torch): seconds, no pipeline run."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytestmark = [pytest.mark.executorch]

torch = pytest.importorskip("torch")


def conv_bn_net() -> Any:
    """conv+BN+ReLU6, conv+BN (a linear bottleneck), then a linear head: BatchNorms with
    running statistics that are not the identity, so folding them matters."""
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential()
    model.add_module("conv1", nn.Conv2d(3, 8, 3, padding=1, bias=False))
    model.add_module("bn1", nn.BatchNorm2d(8))
    model.add_module("act", nn.ReLU6())
    model.add_module("conv2", nn.Conv2d(8, 4, 1, bias=False))
    model.add_module("bn2", nn.BatchNorm2d(4))
    model.add_module("pool", nn.AdaptiveAvgPool2d(1))
    model.add_module("flat", nn.Flatten())
    model.add_module("fc", nn.Linear(4, 5))
    with torch.no_grad():
        for bn in (model.bn1, model.bn2):
            bn.running_mean.uniform_(-1, 1)
            bn.running_var.uniform_(0.5, 2)
            bn.weight.uniform_(0.5, 1.5)
            bn.bias.uniform_(-0.5, 0.5)
    return model.eval()


def feeds(count: int) -> list[tuple[Any, ...]]:
    rng = np.random.default_rng(3)
    # A positive mean: rounding the weights then shifts each channel's mean output.
    return [(torch.from_numpy(rng.uniform(0, 2, (1, 3, 12, 12)).astype(np.float32)),)
            for _ in range(count)]


def first_layer_shift(model: Any, samples: list[tuple[Any, ...]]) -> Any:
    """conv1's own mean output shift per channel in the scheme bias.py models: the input
    asymmetric int8 over the samples' min/max, the BN-folded weight symmetric per-channel
    int8 in [-127, 127]."""
    x = torch.cat([s[0] for s in samples])
    low, high = min(float(x.min()), 0.0), max(float(x.max()), 0.0)
    scale = (high - low) / 255
    zero = -128 - round(low / scale)
    xq = (torch.clamp(torch.round(x / scale) + zero, -128, 127) - zero) * scale
    bn = model.bn1
    folded = model.conv1.weight * (bn.weight / torch.sqrt(bn.running_var + bn.eps))[:, None,
                                                                                      None, None]
    step = folded.abs().amax(dim=(1, 2, 3), keepdim=True) / 127
    wq = torch.clamp(torch.round(folded / step), -127, 127) * step
    conv = torch.nn.functional.conv2d
    return (conv(xq, wq, padding=1) - conv(x, folded, padding=1)).mean(dim=(0, 2, 3))


def test_the_shift_goes_into_the_batchnorm_after_each_conv() -> None:
    from edgebuild.backends.litert_torch import bias

    model, samples = conv_bn_net(), feeds(8)
    with torch.no_grad():
        corrected, shifts = bias.corrected(model, samples[0], samples, keep=[])
        expected = first_layer_shift(model, samples)
    assert set(shifts) == {"bn1", "bn2", "fc"}
    moved = model.bn1.bias - corrected.bn1.bias
    assert float(expected.abs().max()) > 1e-3  # a real shift, not rounding noise
    np.testing.assert_allclose(moved.detach().numpy(), expected.detach().numpy(),
                               rtol=0, atol=1e-3 * float(expected.abs().max()))
    # Only biases move: every weight and running statistic is the model's own.
    for (name, before), (_, after) in zip(model.state_dict().items(),
                                          corrected.state_dict().items(), strict=True):
        if not name.endswith("bias"):
            assert torch.equal(before, after), name
    assert model.bn1.bias is not corrected.bn1.bias  # a copy: the stage's model untouched


def test_a_kept_layer_keeps_its_bias() -> None:
    from edgebuild.backends.litert_torch import bias

    model, samples = conv_bn_net(), feeds(8)
    with torch.no_grad():
        corrected, shifts = bias.corrected(model, samples[0], samples, keep=["conv2"])
    assert "bn2" not in shifts and "bn1" in shifts
    assert torch.equal(model.bn2.bias, corrected.bn2.bias)
    assert not torch.equal(model.bn1.bias, corrected.bn1.bias)
