"""The rules that decide which nodes INT8 leaves float (edgebuild/quant/safety.py)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from edgebuild.quant.safety import (
    mixed_range_nodes,
    output_tail,
    quantizer_range,
    signal_front_end,
    worst_slice_error,
)


def _graph(nodes: list[onnx.NodeProto], inits: dict[str, np.ndarray]) -> onnx.GraphProto:
    return helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])


def _head() -> onnx.GraphProto:
    """x ─ Conv ─ Relu ─┬─ Conv(box) ─ Sigmoid ─ Mul(320) ─┐
                        └─ Conv(cls) ─ Sigmoid ────────────┴─ Concat ─ y"""
    w = np.ones((4, 3, 1, 1), np.float32)
    return _graph([
        helper.make_node("Conv", ["x", "w"], ["f"], name="stem"),
        helper.make_node("Relu", ["f"], ["r"], name="relu"),
        helper.make_node("Conv", ["r", "wb"], ["b"], name="box"),
        helper.make_node("Sigmoid", ["b"], ["bs"], name="box_sigmoid"),
        helper.make_node("Mul", ["bs", "k"], ["px"], name="decode"),
        helper.make_node("Conv", ["r", "wc"], ["c"], name="cls"),
        helper.make_node("Sigmoid", ["c"], ["cs"], name="cls_sigmoid"),
        helper.make_node("Concat", ["px", "cs"], ["y"], name="head", axis=1),
    ], {"w": w, "wb": np.ones((4, 4, 1, 1), np.float32),
        "wc": np.ones((2, 4, 1, 1), np.float32), "k": np.array(320.0, np.float32)})


def test_output_tail_is_everything_after_the_last_weight_layers() -> None:
    assert output_tail(_head()) == ["box_sigmoid", "decode", "cls_sigmoid", "head"]


def test_nodes_that_feed_a_weight_layer_are_not_tail() -> None:
    graph = _graph([
        helper.make_node("Conv", ["x", "w"], ["a"], name="c1"),
        helper.make_node("Sigmoid", ["a"], ["s"], name="mid"),   # feeds c2: not tail
        helper.make_node("Conv", ["s", "w2"], ["b"], name="c2"),
        helper.make_node("Sigmoid", ["a"], ["s2"], name="side"),  # feeds the tail only
        helper.make_node("Add", ["b", "s2"], ["y"], name="out"),
    ], {"w": np.ones((4, 3, 1, 1), np.float32), "w2": np.ones((4, 4, 1, 1), np.float32)})
    assert output_tail(graph) == ["side", "out"]


def test_signal_front_end_is_pad_and_stft_before_the_first_weight_layer() -> None:
    graph = _graph([
        helper.make_node("Pad", ["x", "pads"], ["p"], name="pad", mode="reflect"),
        helper.make_node("DFT", ["p"], ["d"], name="dft"),
        helper.make_node("Conv", ["d", "w"], ["c"], name="conv"),
        helper.make_node("Pad", ["c", "pads"], ["y"], name="later_pad"),  # after a conv
    ], {"pads": np.zeros(8, np.int64), "w": np.ones((4, 3, 1, 1), np.float32)})
    assert signal_front_end(graph) == ["pad", "dft"]


def test_mixed_ranges_are_found_beyond_the_bound_only() -> None:
    ranges = {"px": (0.0, 320.0), "cs": (0.02, 0.98)}  # quantizer ranges include 0
    found = mixed_range_nodes(_head(), {k: quantizer_range([np.array(v)])
                                        for k, v in ranges.items()}, 16.0)
    assert [m.node for m in found] == ["head"] and found[0].ratio > 300
    close = {"px": (0.0, 10.0), "cs": (0.0, 1.0)}  # ratio 10: one scale keeps 25 codes
    assert mixed_range_nodes(_head(), close, 16.0) == []
    # An all-zero input needs no codes: it does not make a ratio.
    assert mixed_range_nodes(_head(), {"px": (0.0, 320.0), "cs": (0.0, 0.0)}, 16.0) == []


def test_worst_slice_error_sees_a_zeroed_narrow_channel_the_whole_tensor_hides() -> None:
    reference = np.concatenate([np.full((1, 4, 100), 160.0), np.full((1, 3, 100), 0.5)], 1)
    zeroed = reference.copy()
    zeroed[:, 4:] = 0.0
    whole = np.linalg.norm(reference - zeroed) / np.linalg.norm(reference)
    assert whole < 0.01  # the boxes dominate the norm
    error, where = worst_slice_error([reference], [zeroed])
    assert error == 1.0 and where == "output 0, channel 4"
