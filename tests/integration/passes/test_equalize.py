"""Cross-layer equalization: exact around ReLU6, on a MobileNet-style block, a trained CNN,
and (slow) EfficientNet-Lite0."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from edgebuild.core.artifact import Artifact
from edgebuild.quant.levers import equalize as eq
from tests.integration.passes import mbconv

pytest.importorskip("onnxruntime")


def exact_bounds(model: onnx.ModelProto, low: float, high: float) -> dict[str, np.ndarray]:
    ranges = {"x": (np.full(mbconv.C_IN, low), np.full(mbconv.C_IN, high))}
    return {k: hi for k, (_, hi) in eq.interval_bounds(model, ranges).items()}


def equalized(tmp_path: Path, clip: eq.ClipPolicy) -> tuple[Path, Path, eq.EqualizeResult]:
    source = mbconv.build(tmp_path / "mbconv.onnx")
    model = onnx.load(str(source))
    bounds = exact_bounds(model, *mbconv.INPUT_RANGE) if clip == "exact" else None
    result = eq.equalize(model, clip, upper_bounds=bounds)
    target = tmp_path / f"cle-{clip}.onnx"
    onnx.save(model, str(target))
    return source, target, result


def test_pairs_are_the_chains_that_can_be_rescaled(tmp_path: Path) -> None:
    pairs = eq.find_pairs(onnx.load(str(mbconv.build(tmp_path / "m.onnx"))))
    # project -> head is not a pair: the residual Add also consumes project's output.
    assert [(p.conv1.name, p.act.name if p.act else None, p.conv2.name, p.clip_high)
            for p in pairs] == [("expand", "expand_clip", "depthwise", 6.0),
                                ("depthwise", "depthwise_clip", "project", 6.0)]


def test_interval_bounds_contain_every_value(tmp_path: Path) -> None:
    from edgebuild.quant.layer_compare import run_all

    source = mbconv.build(tmp_path / "m.onnx")
    bounds = eq.interval_bounds(onnx.load(str(source)),
                                {"x": (np.full(mbconv.C_IN, -1.0), np.full(mbconv.C_IN, 1.0))})
    x = mbconv.inputs(16)
    values = run_all(source, [{"x": x[i:i + 1]} for i in range(len(x))])
    for tensor in ("e", "e6", "d", "d6", "p", "r", "h"):
        low, high = bounds[tensor]
        v = values[tensor].reshape(len(x), len(high), -1)
        assert np.all(v.min(axis=(0, 2)) >= low - 1e-4), tensor
        assert np.all(v.max(axis=(0, 2)) <= high + 1e-4), tensor


def test_exact_equalization_keeps_the_function_and_equalizes(tmp_path: Path) -> None:
    source, target, result = equalized(tmp_path, "exact")
    x = mbconv.inputs(32)
    before, after = mbconv.run(source, x, "none"), mbconv.run(target, x, "none")
    assert np.max(np.abs(after - before)) <= 1e-4 * np.max(np.abs(before))
    assert result.scaled_channels > 0 and result.pinned_by_clip > 0
    assert result.range_ratio_after < result.range_ratio_before


def test_exact_equalization_leaves_channels_whose_clip_binds(tmp_path: Path) -> None:
    source, target, _ = equalized(tmp_path, "exact")
    weights = {m: {i.name: numpy_helper.to_array(i) for i in onnx.load(str(m)).graph.initializer}
               for m in (source, target)}
    # Expand channels 0-2 have a bias of 50: ReLU6 always clips them, so no scale is exact.
    np.testing.assert_array_equal(weights[source]["expand_w"][:3], weights[target]["expand_w"][:3])
    assert not np.allclose(weights[source]["expand_w"], weights[target]["expand_w"])


def test_relu_policy_is_the_papers_and_changes_the_function(tmp_path: Path) -> None:
    source, target, result = equalized(tmp_path, "relu")
    assert result.clips_replaced == 2 and result.pinned_by_clip == 0
    assert {n.op_type for n in onnx.load(str(target)).graph.node} >= {"Relu"}
    x = mbconv.inputs(8)
    assert np.max(np.abs(mbconv.run(target, x) - mbconv.run(source, x))) > 1e-2


def test_unbounded_clipped_pairs_are_left_alone(tmp_path: Path) -> None:
    model = onnx.load(str(mbconv.build(tmp_path / "m.onnx")))
    result = eq.equalize(model, "exact", upper_bounds=None)
    assert result.scaled_channels == 0


@pytest.mark.slow
def test_relu_network_equalizes_exactly(tmp_path: Path, fashion_onnx: Artifact) -> None:
    """The trained Fashion-MNIST CNN: conv -> ReLU -> conv chains, scaled without limits."""
    from tests.integration.passes.conftest import context

    model = onnx.load(str(fashion_onnx.main))
    result = eq.equalize(model, "exact", upper_bounds={})
    target = tmp_path / "cle.onnx"
    onnx.save(model, str(target))
    assert result.pairs >= 2 and result.scaled_channels > 0
    assert result.range_ratio_after < result.range_ratio_before
    import onnxruntime as ort

    x = context(tmp_path / "ctx").dataset("test").inputs["image"][:64]
    before, after = (ort.InferenceSession(str(p), providers=["CPUExecutionProvider"])
                     .run(None, {"image": x})[0] for p in (fashion_onnx.main, target))
    assert np.max(np.abs(after - before)) <= 1e-4 * np.max(np.abs(before))


@pytest.mark.slow
def test_efficientnet_lite0_keeps_its_function(tmp_path: Path) -> None:
    """EfficientNet-Lite0 (ReLU6 everywhere) equalized in `exact` mode, on real photos."""
    pytest.importorskip("efficientnet_lite_pytorch", reason="needs the quickstart model")
    from edgebuild.quant.params import QuantizeParams
    from edgebuild.quant.prepare import prepare
    from edgebuild.quant.samples import outputs
    from tests.integration.passes.efficientnet import efficientnet_onnx, photos

    source = efficientnet_onnx(tmp_path)
    samples = photos(8)
    p = QuantizeParams(mode="static", calibration="photos", equalize={"clip": "exact"})
    prepared = prepare(source, p, samples, tmp_path / "work")
    summary = prepared.metadata["equalize"]
    assert summary["pairs"] == 34 and summary["scaled_channels"] > 0
    before, after = outputs(source, samples), outputs(prepared.path, samples)
    assert np.max(np.abs(after - before)) <= 1e-4 * np.max(np.abs(before))
    assert summary["fp32_top1_agreement"] == 100.0


def test_interval_bounds_pass_over_nodes_without_inputs() -> None:
    """PP-OCRv4's recognizer (rapidocr) has Constant nodes: they have no input, and the
    fidelity budget's `equalize` step died on them with IndexError."""
    from onnx import TensorProto, helper

    const = helper.make_node("Constant", [], ["c"], value=helper.make_tensor(
        "v", TensorProto.FLOAT, [1], [2.0]))
    relu = helper.make_node("Relu", ["x"], ["r"])
    add = helper.make_node("Add", ["r", "c"], ["y"])
    graph = helper.make_graph(
        [const, relu, add], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])])
    bounds = eq.interval_bounds(helper.make_model(graph), {"x": (np.array([-1.0, -3.0]),
                                                                np.array([1.0, 4.0]))})
    np.testing.assert_array_equal(bounds["r"][1], [1.0, 4.0])
    assert "c" not in bounds and "y" not in bounds  # the constant's range is not derived
