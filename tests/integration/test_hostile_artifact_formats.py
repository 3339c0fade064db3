"""The other formats a downstream stage deserialises refuse what would reach outside
the entry or run code (issue 28.1): an outputs .npz with a pickled object array, an
ONNX model whose external data names a file outside its folder."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import pytest


class _Payload:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        import os

        return (os.system, (f"touch {self.marker}",))


def test_an_outputs_file_with_a_pickled_array_is_refused(tmp_path: Path) -> None:
    """The accuracy gate reads a reference's outputs.npz from the cache with np.load's
    default allow_pickle=False: an object array is an error, its payload never runs."""
    from edgebuild.fidelity.outputs import read_output

    marker = tmp_path / "pwned"
    array = np.empty(1, dtype=object)
    array[0] = _Payload(marker)
    buffer = io.BytesIO()
    np.savez(buffer, **{"output:logits": array, "labels": np.zeros(1)})
    (tmp_path / "outputs.npz").write_bytes(buffer.getvalue())
    with pytest.raises(ValueError, match="allow_pickle=False"):
        read_output(tmp_path / "outputs.npz", "logits")
    assert not marker.exists()


@pytest.mark.parametrize("location", ["ABSOLUTE", "../secret.bin"])
def test_onnx_external_data_outside_the_entry_is_refused(tmp_path: Path,
                                                         location: str) -> None:
    """Stages load ONNX with onnx.load (some with external data) and ONNX Runtime; both
    refuse a tensor whose external data lies outside the model's folder."""
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper, numpy_helper

    secret = tmp_path / "secret.bin"
    secret.write_bytes(b"0123456789abcdef")
    weight = numpy_helper.from_array(np.zeros((2, 2), np.float32), "W")
    weight.ClearField("raw_data")
    weight.data_location = TensorProto.EXTERNAL
    where = str(secret) if location == "ABSOLUTE" else location
    for key, value in (("location", where), ("offset", "0"), ("length", "16")):
        entry = weight.external_data.add()
        entry.key, entry.value = key, value
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2])], [weight])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    (tmp_path / "entry").mkdir()
    path = tmp_path / "entry" / "model.onnx"
    path.write_bytes(model.SerializeToString())
    with pytest.raises(Exception, match=r"absolute path|points outside the directory"):
        onnx.load(str(path))
    with pytest.raises(Exception, match="External data path"):
        ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
