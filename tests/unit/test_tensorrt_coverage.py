"""The TensorRT ONNX-parser coverage table, on small real ONNX models built with onnx.helper.

The verdicts come from onnx-tensorrt's docs/operators.md (parser_rules.py); these tests
pin the transcription's counts and the decisions a reviewer relies on.
"""

from __future__ import annotations

from typing import Any

import pytest

from edgebuild.backends.tensorrt import parser_rules
from edgebuild.backends.tensorrt.coverage import Verdict, coverage

onnx = pytest.importorskip("onnx")
helper, TensorProto, numpy_helper = onnx.helper, onnx.TensorProto, onnx.numpy_helper
np = pytest.importorskip("numpy")

F = TensorProto.FLOAT


def model(nodes: list[Any], inputs: list[Any], outputs: list[Any],
          initializers: list[Any] | None = None, opset: int = 17,
          extra_opsets: tuple[tuple[str, int], ...] = ()) -> Any:
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializers or [])
    opsets = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, v)
                                                 for d, v in extra_opsets]
    return helper.make_model(graph, opset_imports=opsets)


def value(name: str, elem: int, shape: list[Any]) -> Any:
    return helper.make_tensor_value_info(name, elem, shape)


def weight(name: str, *shape: int, dtype: Any = None) -> Any:
    return numpy_helper.from_array(np.ones(shape, dtype=dtype or np.float32), name)


def cnn(batch: Any = 1) -> Any:
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("Flatten", ["r"], ["f"], name="flat"),
             helper.make_node("Gemm", ["f", "fw", "fb"], ["y"], name="fc", transB=1)]
    return model(nodes, [value("x", F, [batch, 3, 4, 4])], [value("y", F, [batch, 10])],
                 [weight("w", 8, 3, 3, 3), weight("b", 8), weight("fw", 10, 128),
                  weight("fb", 10)])


def test_matrix_counts_and_sources() -> None:
    by_version = {m.trt_version: m for m in parser_rules.MATRICES}
    assert {v: (len(m.ops), len(m.unsupported)) for v, m in by_version.items()} == {
        "10.1": (196, 46), "10.15": (200, 42), "11.1": (201, 42)}
    for m in parser_rules.MATRICES:
        assert len(m.commit) == 40 and int(m.commit, 16)
    assert by_version["10.1"].commit == "96e781103cfc4adf4a6bb557e94bac8e693f6f4c"
    assert (by_version["10.1"].opset_max, by_version["11.1"].opset_max) == (20, 24)
    assert "Swish" in by_version["11.1"].ops and "Swish" not in by_version["10.15"].ops
    assert by_version["10.1"].ops["STFT"].supported is False
    assert by_version["11.1"].ops["STFT"].supported is True
    assert parser_rules.matrix_for("10.3").trt_version == "10.1"
    assert parser_rules.matrix_for("10.16").trt_version == "10.15"
    with pytest.raises(ValueError):
        parser_rules.matrix_for("latest")


def test_conv_relu_gemm_is_all_supported() -> None:
    report = coverage(cnn())
    assert {r.op: r.verdict for r in report.rows} == dict.fromkeys(
        ("Conv", "Relu", "Flatten", "Gemm"), Verdict.SUPPORTED)
    assert {r.dtype for r in report.rows} == {"FP32"}
    assert report.unsupported == [] and report.dynamic_inputs == []
    assert report.summary.startswith("4 of 4 nodes supported")


@pytest.mark.parametrize("op", ["ConvInteger", "Unique", "QLinearMatMul"])
def test_ops_marked_n_need_a_plugin(op: str) -> None:
    node = helper.make_node(op, ["a", "b"] if op != "Unique" else ["a"], ["y"], name="bad")
    if op == "QLinearMatMul":
        node = helper.make_node(op, ["a", "s", "z", "b", "s", "z", "s", "z"], ["y"], name="bad")
    report = coverage(model([node], [value("a", TensorProto.UINT8, [2, 2]),
                                     value("b", TensorProto.UINT8, [2, 2]),
                                     value("s", F, []), value("z", TensorProto.UINT8, [])],
                            [value("y", TensorProto.INT32, None)]))
    (row,) = report.unsupported
    assert row.op == op and row.examples == ("bad",)
    assert "marked N" in row.note and "needs a plugin" in row.note
    assert f"1 needs a plugin: {op}" in report.summary


def test_custom_domain_node_needs_a_plugin() -> None:
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("MyNms", ["r"], ["y"], name="nms", domain="com.acme")]
    report = coverage(model(nodes, [value("x", F, [1, 4])], [value("y", F, None)],
                            extra_opsets=(("com.acme", 1),)))
    (row,) = report.unsupported
    assert (row.domain, row.op) == ("com.acme", "MyNms")
    assert "custom domain 'com.acme'" in row.note and "plugin named MyNms" in row.note
    assert "1 of 2 nodes supported" in report.summary
    assert "com.acme::MyNms" in report.summary


def test_custom_domain_op_with_a_builtin_name_is_restricted() -> None:
    node = helper.make_node("Gelu", ["x"], ["y"], name="g", domain="com.microsoft")
    report = coverage(model([node], [value("x", F, [1, 4])], [value("y", F, [1, 4])],
                            extra_opsets=(("com.microsoft", 1),)))
    (row,) = report.restricted
    assert "dispatches on op_type alone" in row.note


def test_unsupported_op_inside_if_branch_is_found() -> None:
    then_graph = helper.make_graph(
        [helper.make_node("Unique", ["x"], ["u"], name="uniq")], "then", [],
        [value("u", F, None)])
    else_graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["e"], name="ident")], "else", [],
        [value("e", F, None)])
    node = helper.make_node("If", ["cond"], ["y"], name="branch", then_branch=then_graph,
                            else_branch=else_graph)
    report = coverage(model([node], [value("cond", TensorProto.BOOL, []),
                                     value("x", F, [3])], [value("y", F, None)]))
    (row,) = report.unsupported
    assert row.op == "Unique" and row.examples == ("branch/then_branch/uniq",)
    assert {r.op for r in report.rows} == {"If", "Unique", "Identity"}
    assert report.nodes == 3


def test_types_outside_the_row_are_restricted_and_matrices_differ() -> None:
    # Pow lists FP32, FP16, BF16 in 10.1 and adds INT32, INT64 by 10.15.
    pow_model = model([helper.make_node("Pow", ["a", "b"], ["y"], name="p")],
                      [value("a", TensorProto.INT32, [4]), value("b", TensorProto.INT32, [4])],
                      [value("y", TensorProto.INT32, [4])])
    old, new = coverage(pow_model, "10.1").rows[0], coverage(pow_model, "10.15").rows[0]
    assert (old.verdict, new.verdict) == (Verdict.RESTRICTED, Verdict.SUPPORTED)
    assert old.dtype == "INT32" and "not among the supported types" in old.note
    double = model([helper.make_node("Add", ["a", "a"], ["y"], name="add")],
                   [value("a", TensorProto.DOUBLE, [2])], [value("y", TensorProto.DOUBLE, [2])])
    row = coverage(double).rows[0]
    assert row.verdict is Verdict.RESTRICTED and "casts it down to FP32" in row.note


def test_string_tensors_are_unsupported() -> None:
    node = helper.make_node("Identity", ["s"], ["y"], name="id")
    report = coverage(model([node], [value("s", TensorProto.STRING, [2])],
                            [value("y", TensorProto.STRING, [2])]))
    assert report.unsupported[0].note == "TensorRT has no STRING tensors"


def test_checked_restrictions() -> None:
    nodes = [helper.make_node("Resize", ["x", "", "scales"], ["r"], name="cubic",
                              mode="cubic"),
             helper.make_node("MaxPool", ["r"], ["p", "idx"], name="pool", kernel_shape=[2, 2]),
             helper.make_node("Shape", ["x"], ["shape"], name="shape"),
             helper.make_node("Gather", ["shape", "zero"], ["dim"], name="g"),
             helper.make_node("Unsqueeze", ["p", "dim"], ["y"], name="unsq")]
    report = coverage(model(nodes, [value("x", F, [1, 1, 4, 4])], [value("y", F, None)],
                            [numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32),
                                                     "scales"),
                             numpy_helper.from_array(np.array([0], np.int64), "zero")],
                            opset=13))
    notes = {r.op: r.note for r in report.restricted}
    assert "mode=cubic" in notes["Resize"]
    assert "`Indices` output" in notes["MaxPool"]
    assert "`axes` is computed in the graph" in notes["Unsqueeze"]
    assert {r.op for r in report.rows if r.verdict is Verdict.SUPPORTED} == {"Shape", "Gather"}


def test_dynamic_inputs_need_a_profile_and_markdown_cites_the_source() -> None:
    report = coverage(cnn(batch="N"), "10.3")
    assert [(d.name, d.shape) for d in report.dynamic_inputs] == [("x", ("N", "3", "4", "4"))]
    assert "optimization profile" in report.summary and "x[N,3,4,4]" in report.summary
    text = report.markdown()
    assert text.startswith("### TensorRT 10.3 ONNX parser coverage (matrix of TensorRT 10.1")
    assert "96e781103cfc4adf4a6bb557e94bac8e693f6f4c" in text
    assert "| op | opset | types | count | verdict | note |" in text
    assert "| Conv | 17 | FP32 | 1 | supported | e.g. conv |" in text
    assert report.summary in text


def test_local_function_body_is_walked() -> None:
    body = [helper.make_node("Unique", ["a"], ["b"], name="inner")]
    function = helper.make_function("local", "MyBlock", ["a"], ["b"], body,
                                    [helper.make_opsetid("", 17)])
    graph = helper.make_graph([helper.make_node("MyBlock", ["x"], ["y"], name="blk",
                                                domain="local")],
                              "g", [value("x", F, [3])], [value("y", F, None)])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                helper.make_opsetid("local", 1)],
                          functions=[function])
    rows = {r.op: r for r in coverage(m).rows}
    assert rows["MyBlock"].verdict is Verdict.SUPPORTED
    assert rows["Unique"].verdict is Verdict.UNSUPPORTED
    assert rows["Unique"].examples == ("blk/MyBlock/inner",)


def test_loop_body_and_uint8_dequantize() -> None:
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"], name="keep"),
         helper.make_node("StringNormalizer", ["v_in"], ["v_out"], name="norm")],
        "body", [value("i", TensorProto.INT64, []), value("cond_in", TensorProto.BOOL, []),
                 value("v_in", TensorProto.STRING, [1])],
        [value("cond_out", TensorProto.BOOL, []), value("v_out", TensorProto.STRING, [1])])
    loop = helper.make_node("Loop", ["n", "c", "v"], ["out"], name="loop", body=body)
    dq = helper.make_node("DequantizeLinear", ["q", "scale", "zp"], ["dq"], name="dq")
    report = coverage(model(
        [loop, dq], [value("n", TensorProto.INT64, []), value("c", TensorProto.BOOL, []),
                     value("v", TensorProto.STRING, [1]), value("q", TensorProto.UINT8, [4])],
        [value("out", TensorProto.STRING, [1]), value("dq", F, [4])],
        [numpy_helper.from_array(np.array(0.5, np.float32), "scale"),
         numpy_helper.from_array(np.array(128, np.uint8), "zp")]))
    rows = {r.op: r for r in report.rows}
    assert rows["StringNormalizer"].verdict is Verdict.UNSUPPORTED
    assert rows["StringNormalizer"].examples == ("loop/body/norm",)
    assert rows["Loop"].verdict is Verdict.SUPPORTED
    dq_note = rows["DequantizeLinear"].note
    assert rows["DequantizeLinear"].verdict is Verdict.RESTRICTED
    assert "UINT8 is only supported as a network input or output" in dq_note
    assert "non-zero `x_zero_point`" in dq_note
