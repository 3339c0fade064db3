"""Empirical bias correction: the measured shift is (W_q - W)·E[x], and correcting it
reduces the mean output error of a real quantized CNN."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from edgebuild.data.loaders import Samples
from edgebuild.quant.engine import quantize
from edgebuild.quant.levers import bias_correction as bc
from edgebuild.quant.params import QuantizeParams
from edgebuild.quant.prepare import prepare, quantize_prepared
from edgebuild.quant.samples import feeds, outputs
from tests.integration.passes import mbconv

pytest.importorskip("onnxruntime")


def one_conv(path: Path) -> Path:
    rng = np.random.default_rng(0)
    w = rng.standard_normal((6, 4, 3, 3)).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w", "b"], ["y"], name="conv", pads=[1, 1, 1, 1])],
        "one", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 4, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 6, 8, 8])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                                ir_version=8), str(path))
    return path


def test_shift_is_the_weight_error_times_the_input_mean(tmp_path: Path) -> None:
    source = one_conv(tmp_path / "conv.onnx")
    rng = np.random.default_rng(1)
    x = rng.uniform(0, 3, (16, 4, 8, 8)).astype(np.float32)  # post-ReLU-like: mean 1.5
    samples = Samples({"x": x}, None, [str(i) for i in range(len(x))])
    p = QuantizeParams(mode="static", calibration="c", per_channel=False)
    qdq = tmp_path / "q.onnx"
    quantize(source, qdq, p, samples, [], tmp_path)
    shifts = bc.measure_shifts(source, qdq, feeds(samples))
    # Expected: (W_q - W) convolved with the data, averaged — without input rounding
    # this is the weight error times the input mean (padding zeros included).
    q = onnx.load(str(qdq))
    inits = {i.name: numpy_helper.to_array(i) for i in q.graph.initializer}
    w = numpy_helper.to_array(onnx.load(str(source)).graph.initializer[0])
    w_q = next(inits[n.input[0]].astype(np.float64) * inits[n.input[1]]
               for n in q.graph.node if n.op_type == "DequantizeLinear"
               and inits.get(n.input[0], np.zeros(0)).dtype == np.int8)
    padded = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(2, 3))
    expected = np.einsum("nchwij,ocij->o", windows, w_q - w) / (16 * 8 * 8)
    assert set(shifts) == {"conv"}
    np.testing.assert_allclose(shifts["conv"], expected, atol=0.02 * np.abs(expected).max())


def test_apply_shifts_subtracts_from_the_bias(tmp_path: Path) -> None:
    model = onnx.load(str(one_conv(tmp_path / "conv.onnx")))
    before = numpy_helper.to_array(model.graph.initializer[1]).copy()
    assert bc.apply_shifts(model, {"conv": np.arange(6.0)}) == 1
    after = numpy_helper.to_array(model.graph.initializer[1])
    np.testing.assert_allclose(after, before - np.arange(6.0), rtol=1e-6)


def test_bias_correction_reduces_the_mean_output_error(tmp_path: Path) -> None:
    """A MobileNet-style block with per-tensor 7-bit weights: the depthwise channels with
    small weights round badly, and the mean logit shift on unseen inputs shrinks."""
    source = mbconv.build(tmp_path / "m.onnx")
    calibration = Samples({"x": mbconv.inputs(32, seed=1)}, None, ["-"] * 32)
    unseen = Samples({"x": mbconv.inputs(64, seed=2)}, None, ["-"] * 64)
    reference = outputs(source, unseen)
    shifts, metadata = {}, {}
    for corrected in (False, True):
        p = QuantizeParams(mode="static", calibration="c", per_channel=False,
                           reduce_range=True, bias_correction=corrected)
        work = tmp_path / f"work-{corrected}"
        prepared = prepare(source, p, calibration, work)
        quantize_prepared(prepared, tmp_path / "q.onnx", p, calibration, [], work)
        got = outputs(tmp_path / "q.onnx", unseen)
        shifts[corrected] = float(np.abs((got - reference).mean(axis=0)).mean())
        metadata[corrected] = prepared.metadata
    assert shifts[True] < 0.6 * shifts[False], shifts
    assert metadata[True]["bias_correction"]["layers"] == 4  # 3 convs + the head
    assert "bias_correction" not in metadata[False]
