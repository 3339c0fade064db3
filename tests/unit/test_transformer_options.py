"""Params of the transformer levers: quantize `preset: transformer`, the ORT fusion pass,
openvino-quantize `model_type` (validation only: no model is loaded)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from edgebuild.backends.openvino.quantize import OpenVinoQuantizeParams
from edgebuild.passes.ort_transformer import OrtTransformerParams, split_unsqueezes
from edgebuild.quant.params import QuantizeParams


def test_transformer_preset_quantizes_only_the_weight_gemms() -> None:
    p = QuantizeParams.model_validate({"mode": "dynamic", "preset": "transformer"})
    assert p.op_types == ["MatMul", "Gemm"] and p.per_channel
    static = QuantizeParams.model_validate({"mode": "static", "preset": "transformer",
                                            "calibration": "seq16"})
    assert static.op_types == ["MatMul", "Gemm"]


def test_transformer_preset_refuses_what_it_sets_differently() -> None:
    with pytest.raises(ValidationError, match="per_channel: False differently"):
        QuantizeParams.model_validate({"mode": "dynamic", "preset": "transformer",
                                       "per_channel": False})
    with pytest.raises(ValidationError, match="INT8 preset"):
        QuantizeParams.model_validate({"mode": "fp16", "preset": "transformer"})
    with pytest.raises(ValidationError, match="preset"):
        QuantizeParams.model_validate({"mode": "dynamic", "preset": "bert"})


def test_fusion_params() -> None:
    assert OrtTransformerParams().model_type == "bert"
    with pytest.raises(ValidationError, match="both"):
        OrtTransformerParams(num_heads=12)
    with pytest.raises(ValidationError, match="not a multiple"):
        OrtTransformerParams(num_heads=12, hidden_size=100)
    with pytest.raises(ValidationError, match="enabled and disabled"):
        OrtTransformerParams(enable=["gelu_approximation"], disable=["gelu_approximation"])
    with pytest.raises(ValidationError):
        OrtTransformerParams(disable=["atention"])
    with pytest.raises(ValidationError):
        OrtTransformerParams.model_validate({"opt_level": 3})


def test_nncf_model_type() -> None:
    assert OpenVinoQuantizeParams(dataset="d", model_type="transformer").model_type == \
        "transformer"
    with pytest.raises(ValidationError):
        OpenVinoQuantizeParams.model_validate({"dataset": "d", "model_type": "bert"})


def test_split_unsqueezes_keeps_the_tensor() -> None:
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(
        [helper.make_node("Unsqueeze", ["x", "axes"], ["y"], name="u")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 1, 1, 5])],
        [numpy_helper.from_array(np.array([2, 1], np.int64), "axes")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    x = np.arange(10, dtype=np.float32).reshape(2, 5)
    before = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]
    assert split_unsqueezes(model) == 1
    assert [n.op_type for n in model.graph.node] == ["Unsqueeze", "Unsqueeze"]
    onnx.checker.check_model(model)
    after = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]
    assert before.shape == after.shape == (2, 1, 1, 5)
    np.testing.assert_array_equal(before, after)
