"""QNN `precision: qdq`: the model's own Q/DQ is taken as is, and what the HTP cannot
take (no Q/DQ at all, signed activations) is refused before the compile."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from edgebuild.backends.qnn.options import QnnOptions, QnnPrecision
from edgebuild.backends.qnn.quantize import given_qdq
from edgebuild.errors import StageError


def _model(path: Path, zero_point: np.ndarray | None) -> Path:
    """x -> Relu -> y, with a Q/DQ pair of zero point `zero_point` (None: no Q/DQ)."""
    nodes = [helper.make_node("Relu", ["x"], ["r" if zero_point is not None else "y"])]
    inits = []
    if zero_point is not None:
        inits = [numpy_helper.from_array(np.array(0.1, np.float32), "s"),
                 numpy_helper.from_array(zero_point, "z")]
        nodes += [helper.make_node("QuantizeLinear", ["r", "s", "z"], ["q"], name="q0"),
                  helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], name="dq0")]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_unsigned_qdq_taken_as_is(tmp_path: Path) -> None:
    found = given_qdq(_model(tmp_path / "m.onnx", np.array(128, np.uint8)))
    assert (found["quantize_nodes"], found["dequantize_nodes"]) == (1, 1)


def test_no_qdq_refused_with_a_hint(tmp_path: Path) -> None:
    with pytest.raises(StageError, match="has none") as caught:
        given_qdq(_model(tmp_path / "m.onnx", None))
    assert "quantize" in (caught.value.hint or "")


def test_signed_activations_refused(tmp_path: Path) -> None:
    with pytest.raises(StageError, match=r"signed activations \(first: q0\)"):
        given_qdq(_model(tmp_path / "m.onnx", np.array(0, np.int8)))


def test_qdq_needs_no_calibration_dataset() -> None:
    assert QnnOptions.model_validate({"precision": "qdq"}).precision is QnnPrecision.QDQ
    with pytest.raises(ValueError, match="calibration_dataset"):
        QnnOptions.model_validate({"precision": "int8"})
