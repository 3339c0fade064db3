"""The Core ML backend's int8 weight options (issue 31): validation, the proxy's int8
arithmetic, and `keep_float` names resolved to PyTorch modules or refused."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from edgebuild.backends.coreml.backend import describe_int8, kept_float
from edgebuild.backends.coreml.options import CoreMlOptions
from edgebuild.backends.coreml.proxy import float_modules, int8_like_coreml
from edgebuild.errors import ExitCode, PlanError
from edgebuild.passes.torch_names import module_name


def test_per_block_needs_the_ios18_opset() -> None:
    with pytest.raises(ValidationError, match="iOS18 or later"):
        CoreMlOptions(weights="int8", granularity="per_block")
    with pytest.raises(ValidationError, match="macOS15 or later"):
        CoreMlOptions(weights="int8", granularity="per_block",
                      minimum_deployment_target="macOS14")
    ok = CoreMlOptions(weights="int8", granularity="per_block", block_size=16,
                       minimum_deployment_target="iOS18")
    assert describe_int8(ok) == "linear symmetric per block of 16 input channels"


def test_int8_only_options_need_int8_or_compression() -> None:
    with pytest.raises(ValidationError, match="applies to `weights: int8`"):
        CoreMlOptions(weights="palettize", granularity="per_block",
                      minimum_deployment_target="iOS18")
    with pytest.raises(ValidationError, match="keep_float names layers"):
        CoreMlOptions(keep_float=["_conv_stem"])
    with pytest.raises(ValidationError):
        CoreMlOptions(weights="int8", block_size=0)
    with pytest.raises(ValidationError):
        CoreMlOptions(weights="int8", int8_mode="asymmetric")


def test_kept_float_metadata_names_the_layers() -> None:
    said = kept_float(CoreMlOptions(weights="int8", keep_float=["/_conv_stem/Conv"]))
    assert said is not None and said["nodes"] == ["/_conv_stem/Conv"]
    assert "keep_float" in said["notes"][0] and "weight-only" in said["notes"][1]


@pytest.mark.parametrize(("name", "module"), [
    ("/_conv_stem/Conv_output_0", "_conv_stem"),
    ("/_blocks.0/_project_conv/Conv", "_blocks.0._project_conv"),
    ("/_blocks.1/_depthwise_conv/Conv_output_0", "_blocks.1._depthwise_conv"),
    ("/fc/Gemm", "fc"),
    ("/features/features.6/Conv", "features.6"),
    ("/layer1/layer1.0/conv1/Conv", "layer1.0.conv1"),
    ("_blocks.0._project_conv", "_blocks.0._project_conv"),
])
def test_onnx_names_map_to_module_names(name: str, module: str) -> None:
    assert module_name(name) == module


def test_symmetric_per_channel_keeps_each_channels_extreme() -> None:
    rng = np.random.default_rng(0)
    w = rng.normal(size=(4, 8, 3, 3)).astype(np.float32)
    out = int8_like_coreml(w, "linear_symmetric", 0)
    assert out is not None
    peak = np.abs(w).max(axis=(1, 2, 3))
    np.testing.assert_allclose(np.abs(out).max(axis=(1, 2, 3)), peak, rtol=1e-6)
    step = (peak / 127)[:, None, None, None]
    assert np.all(np.abs(out - w) <= step / 2 + 1e-7)
    # at most 255 distinct levels per channel, each a multiple of the step
    assert np.allclose(np.round(out / step), out / step, atol=1e-4)


def test_per_block_scales_each_block_and_skips_what_it_cannot_divide() -> None:
    w = np.ones((2, 8, 1, 1), np.float32)
    w[:, 4:] *= 100.0  # a block of large weights must not coarsen the small ones
    out = int8_like_coreml(w, "linear_symmetric", 4)
    assert out is not None
    np.testing.assert_allclose(out, w, rtol=1e-6)
    per_channel = int8_like_coreml(w + 0.001, "linear_symmetric", 0)
    assert per_channel is not None and not np.allclose(per_channel, w + 0.001, rtol=1e-4)
    assert int8_like_coreml(np.ones((8, 1, 3, 3), np.float32), "linear_symmetric", 4) is None


def test_linear_mode_represents_zero_and_the_range() -> None:
    w = np.array([[0.0, 0.1, 0.5, 2.0], [-1.0, -0.2, 0.0, 0.0]], np.float32)
    out = int8_like_coreml(w, "linear", 0)
    assert out is not None
    assert out[0, 0] == 0.0 and out[1, 2] == 0.0
    assert np.all(np.abs(out - w) <= (np.ptp(np.c_[w, np.zeros(2)], axis=1) / 255)[:, None])


def test_unknown_float_layer_is_a_usage_error_with_a_hint() -> None:
    torch = pytest.importorskip("torch")
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(),
                                torch.nn.Conv2d(8, 8, 1))
    assert float_modules(model, ["/0/Conv_output_0", "2"]) == ["0", "2"]
    with pytest.raises(PlanError) as error:
        float_modules(model, ["/3/Conv"])
    assert error.value.exit_code is ExitCode.USAGE
    assert "'/3/Conv' is not a layer with weights" in error.value.message
    assert error.value.hint
    with pytest.raises(PlanError, match="not a layer with weights"):
        float_modules(model, ["1"])  # the ReLU: no weights
