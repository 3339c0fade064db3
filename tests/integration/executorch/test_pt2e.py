"""The PT2E int8 recipe (backends/executorch/pt2e.py) on tiny CNNs: ReLU6 quantized after
the clamp, and bias correction removing each layer's mean output shift. Seconds each; no
pipeline run."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytestmark = [pytest.mark.executorch]

torch = pytest.importorskip("torch")


def relu6_net() -> Any:
    """conv+ReLU6 twice (the second depthwise, as in an inverted residual), then a head."""
    from torch import nn

    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU6(),
                         nn.Conv2d(8, 8, 3, padding=1, groups=8), nn.ReLU6(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 4)).eval()


def images(count: int, seed: int = 1) -> list[Any]:
    rng = np.random.default_rng(seed)
    # Wide inputs: the first conv's output spans well past ReLU6's 0..6.
    return [torch.from_numpy(rng.normal(0, 4, (1, 3, 16, 16)).astype(np.float32))
            for _ in range(count)]


def prepared(model: Any, fuse: bool = True, bias_correction: bool = False) -> Any:
    from torchao.quantization.pt2e.quantize_pt2e import prepare_pt2e

    from edgebuild.backends.executorch import pt2e
    from edgebuild.backends.executorch.options import ExecutorchOptions

    options = ExecutorchOptions(precision="int8", calibration_dataset="calibration",
                                fuse_clamps=fuse, bias_correction=bias_correction)
    feeds = images(16)
    captured = torch.export.export(model, (feeds[0],)).module()
    quantizer = pt2e.quantizer(options, None)
    result = prepare_pt2e(captured, quantizer)
    with torch.no_grad():
        for x in feeds:
            result(x)
    result.clamps_fused = quantizer.clamps_fused
    return result


def observers_after(graph_module: Any, target: str) -> list[Any]:
    """The observer modules that consume each `target` op's output."""
    found = []
    for node in graph_module.graph.nodes:
        if node.op == "call_function" and target in str(node.target):
            found += [graph_module.get_submodule(u.target) for u in node.users
                      if u.op == "call_module"]
    return found


def test_relu6_is_quantized_after_the_clamp() -> None:
    fused = prepared(relu6_net())
    assert fused.clamps_fused == 2
    # No observer between a conv and its ReLU6: the int8 range is the clamped output's.
    assert observers_after(fused, "aten.conv2d") == []
    clamped = observers_after(fused, "aten.hardtanh")
    assert len(clamped) == 2
    for observer in clamped:
        assert float(observer.min_val) >= 0 and float(observer.max_val) <= 6
    # XNNPACKQuantizer's own annotation observes the conv's output, before the clamp,
    # and the hardtanh shares that range: codes spent on values ReLU6 cuts off.
    plain = prepared(relu6_net(), fuse=False)
    assert plain.clamps_fused == 0
    before = observers_after(plain, "aten.conv2d")
    assert len(before) == 2
    assert float(before[0].max_val) > 6 and float(before[0].min_val) < 0


def test_fused_relu6_lowers_entirely_to_xnnpack() -> None:
    """conv -> hardtanh -> quantize is a pattern XNNPACK's partitioner fuses: nothing is
    left to the portable kernels."""
    from edgebuild.backends.executorch import coverage, lower
    from edgebuild.backends.executorch.options import ExecutorchOptions
    from edgebuild.core.samples import Samples

    feeds = images(8)
    calibration = Samples({"x": np.concatenate([x.numpy() for x in feeds])}, None,
                          [str(i) for i in range(8)])
    options = ExecutorchOptions(precision="int8", calibration_dataset="calibration")
    _, edge, _, done = lower.build(relu6_net(), (feeds[0],), options, calibration, ["x"])
    assert done["clamps_fused"] == 2
    assert done["bias_corrected"]["layers"] == 3  # two convs and the linear
    rows, _ = coverage.coverage(edge)
    assert sum(row.portable for row in rows) == 0, rows
    assert any(row.op == "aten_hardtanh_default" and row.delegated == 2 for row in rows), rows


def test_bias_correction_removes_the_mean_output_shift() -> None:
    """A depthwise conv fed a positive input (after ReLU6) shifts its output mean when its
    9 weights per channel are rounded; corrected, the int8 model's mean output per channel
    matches FP32's on the calibration data."""
    from torch import nn
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e

    from edgebuild.backends.executorch import pt2e

    torch.manual_seed(0)
    model = nn.Sequential(nn.ReLU6(), nn.Conv2d(16, 16, 3, groups=16)).eval()
    feeds = [(x.repeat(1, 6, 1, 1)[:, :16],) for x in images(16)]
    with torch.no_grad():
        reference = torch.cat([model(*f) for f in feeds]).mean((0, 2, 3))

    def mean_error(correct: bool) -> float:
        from torchao.quantization.pt2e.quantize_pt2e import prepare_pt2e

        from edgebuild.backends.executorch.options import ExecutorchOptions

        options = ExecutorchOptions(precision="int8", calibration_dataset="calibration")
        captured = torch.export.export(model, feeds[0]).module()
        calibrated = prepare_pt2e(captured, pt2e.quantizer(options, None))
        with torch.no_grad():
            for f in feeds:
                calibrated(*f)
        if correct:
            assert len(pt2e.correct_biases(calibrated, feeds)) == 1
        quantized = convert_pt2e(calibrated)
        with torch.no_grad():
            got = torch.cat([quantized(*f) for f in feeds]).mean((0, 2, 3))
        return float((got - reference).abs().mean())

    plain, corrected = mean_error(False), mean_error(True)
    assert plain > 5e-4  # the shift is there to correct (1.8e-3 here)
    assert corrected < plain / 4, (plain, corrected)
