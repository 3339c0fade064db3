"""Pow(x, 2) reaches the HTP as Mul(x, x) (its fp16 Pow is wrong on some elements)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from edgebuild.backends.qnn.squares import squares_as_products


def _model(exponent: float) -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    graph = helper.make_graph(
        [helper.make_node("Constant", [], ["e"],
                          value=numpy_helper.from_array(np.array(exponent, np.float32))),
         helper.make_node("Pow", ["x", "e"], ["y"], name="square")], "g", [x], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_a_square_becomes_a_product(tmp_path: Path) -> None:
    import onnxruntime as ort

    source, destination = tmp_path / "m.onnx", tmp_path / "squares.onnx"
    onnx.save(_model(2.0), str(source))
    assert squares_as_products(source, destination) == ["square"]
    rewritten = onnx.load(str(destination))
    square = rewritten.graph.node[-1]
    assert (square.op_type, list(square.input), square.name) == ("Mul", ["x", "x"], "square")
    data = np.array([[-3.0, -0.5, 0.0, 283.0]], np.float32)
    out = ort.InferenceSession(str(destination)).run(None, {"x": data})[0]
    np.testing.assert_array_equal(out, data * data)


def test_other_powers_are_left_alone(tmp_path: Path) -> None:
    source, destination = tmp_path / "m.onnx", tmp_path / "squares.onnx"
    onnx.save(_model(3.0), str(source))
    assert squares_as_products(source, destination) == []
    assert not destination.exists()
