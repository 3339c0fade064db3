"""How the TFLite, QNN and Core ML backends take the shared INT8 rules (issue 31):
their options, and TFLite's extra float nodes, on graphs built in memory."""

from __future__ import annotations

import onnx
from onnx import TensorProto, helper

from edgebuild.backends.coreml.backend import kept_float as coreml_kept_float
from edgebuild.backends.coreml.options import CoreMlOptions
from edgebuild.backends.qnn.options import QnnOptions
from edgebuild.backends.tflite.backend import _kept_float
from edgebuild.backends.tflite.keep_float import same_scale_feeders, with_fused_activations
from edgebuild.backends.tflite.options import TfliteOptions


def head() -> onnx.GraphProto:
    """boxes ─ Mul ──────────────────┐
    scores ─ Sigmoid ─ Reshape ─ Transpose ─ Concat ─▶ out"""
    nodes = [
        helper.make_node("Mul", ["boxes", "k"], ["b"], name="mul"),
        helper.make_node("Sigmoid", ["scores"], ["s"], name="sigmoid"),
        helper.make_node("Reshape", ["s", "shape"], ["r"], name="reshape"),
        helper.make_node("Transpose", ["r"], ["t"], name="transpose", perm=[0, 1, 2]),
        helper.make_node("Concat", ["b", "t"], ["out"], name="concat", axis=1),
    ]
    value = helper.make_tensor_value_info
    return helper.make_graph(
        nodes, "head", [value("boxes", TensorProto.FLOAT, [1, 4, 8]),
                        value("scores", TensorProto.FLOAT, [1, 3, 8])],
        [value("out", TensorProto.FLOAT, [1, 7, 8])],
        [helper.make_tensor("k", TensorProto.FLOAT, [], [320.0]),
         helper.make_tensor("shape", TensorProto.INT64, [3], [1, 3, 8])])


def test_same_scale_ops_feeding_a_mixed_range_node_stay_float_on_tflite() -> None:
    # Reshape and Transpose would take the Concat's one scale; Sigmoid and Mul compute
    # their own and keep it.
    assert same_scale_feeders(head(), ["concat"]) == ["reshape", "transpose"]
    assert same_scale_feeders(head(), []) == []


def test_an_excluded_conv_takes_the_activation_tflite_fuses_into_it() -> None:
    """Conv ─ Clip (its only consumer) ─ Conv ─┬─ Relu, Add: the first Conv's Clip joins it
    (TFLite fuses it into the CONV_2D, which would otherwise have an int8 owner); the
    second's output has two consumers, so nothing is fused and nothing joins."""
    nodes = [helper.make_node("Conv", ["x", "w"], ["c1"], name="stem"),
             helper.make_node("Clip", ["c1"], ["a1"], name="stem_act"),
             helper.make_node("Conv", ["a1", "w"], ["c2"], name="second"),
             helper.make_node("Relu", ["c2"], ["a2"], name="second_act"),
             helper.make_node("Add", ["c2", "a2"], ["y"], name="add")]
    graph = helper.make_graph(nodes, "g", [], [])
    assert with_fused_activations(graph, ["stem", "second", "missing"]) == \
        ["stem", "stem_act", "second", "missing"]
    assert TfliteOptions(precision="int8", calibration_dataset="calib",
                         exclude_nodes=["stem"]).exclude_nodes == ["stem"]


def test_tflite_int8_rules_options_and_what_other_precisions_say() -> None:
    options = TfliteOptions(precision="int8", calibration_dataset="calib")
    assert options.keep_float.value == "auto" and options.mixed_range_bound == 16
    off = TfliteOptions(precision="int8", calibration_dataset="calib", keep_float="none",
                        mixed_range_bound=None)
    assert off.keep_float.value == "none" and off.mixed_range_bound is None
    dynamic = _kept_float(TfliteOptions(precision="dynamic-int8"), None)
    assert dynamic is not None and "weights only" in dynamic["notes"][0]
    assert _kept_float(TfliteOptions(), None) is None  # float32: nothing to say
    missing = _kept_float(options, None)
    assert missing is not None and "could not run" in missing["notes"][0]


def test_qnn_defaults_to_per_channel_and_can_opt_out_of_the_rules() -> None:
    options = QnnOptions(precision="int8", calibration_dataset="calib")
    assert options.per_channel is True
    assert options.keep_float.value == "auto" and options.mixed_range_bound == 16
    off = QnnOptions(precision="int8", calibration_dataset="calib", per_channel=False,
                     keep_float="none", mixed_range_bound=None)
    assert not off.per_channel and off.keep_float.value == "none"


def test_coreml_says_weight_only_compression_has_no_activation_rules() -> None:
    assert coreml_kept_float(CoreMlOptions()) is None
    said = coreml_kept_float(CoreMlOptions(weights="int8"))
    assert said is not None and said["applies"] is False and said["nodes"] == []
    assert "weight-only" in said["notes"][0]
