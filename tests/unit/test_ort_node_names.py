"""ONNX Runtime's saved optimized model names the nodes it inserts in an order that varies
between runs; the compile stage names them by their place, so its digest is a function of
its key (seen: compile@host-cpu-int8-dynamic differed between a local and a cluster run)."""

from __future__ import annotations

from pathlib import Path

import onnx
from onnx import TensorProto, helper

from edgebuild.backends.onnxruntime.backend import name_inserted_nodes


def _model(path: Path, first: str, second: str) -> Path:
    nodes = [helper.make_node("Identity", ["x"], ["a"], name=first),
             helper.make_node("Relu", ["a"], ["b"], name="/user/Relu"),
             helper.make_node("Identity", ["b"], ["y"], name=second)]
    graph = helper.make_graph(nodes, "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    onnx.save(helper.make_model(graph), str(path))
    return path


def test_names_orts_optimizer_swapped_come_out_the_same(tmp_path: Path) -> None:
    one = _model(tmp_path / "one.onnx", "Identity", "Identity_token_4")
    two = _model(tmp_path / "two.onnx", "Identity_token_4", "Identity")
    name_inserted_nodes(one)
    name_inserted_nodes(two)
    assert one.read_bytes() == two.read_bytes()
    names = [n.name for n in onnx.load(str(one)).graph.node]
    assert names == ["Identity_ort_0", "/user/Relu", "Identity_ort_1"]  # users' names kept
