"""The device tools' per-operator profiles, read from their real recorded outputs
(tests/data/profiles/README.md says where each comes from), checked against the tool's
own totals: benchmark_model's `Timings` line, `%` column and "Summary by node type";
trtexec's per-layer sums and percentages."""

from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from edgebuild.backends.tensorrt.layer_profile import (
    LayerProfileError,
    group_of,
    onnx_node_types,
    parts,
    read,
)
from edgebuild.backends.tensorrt.layer_profile import op_profile as trt_profile
from edgebuild.backends.tensorrt.trtexec import read_layers
from edgebuild.backends.tflite.op_profiling import ProfileLogError, by_type, regular_runs
from edgebuild.backends.tflite.op_profiling import op_profile as tflite_profile
from edgebuild.measure.record import LatencyRecord, read_record

DATA = Path(__file__).parent.parent / "data" / "profiles"
RISCV = DATA / "benchmark_model_qemu_riscv64_mobilenet_v1.txt"
PHONE = DATA / "benchmark_model_nnapi_deeplabv3_phone.txt"
TRT = DATA / "trtexec_mobilenet_v2_residuals_qat.profile.json"


# --- TFLite benchmark_model -------------------------------------------------------------

def test_benchmark_model_rows_add_up_to_its_timings_line() -> None:
    text = RISCV.read_text()
    profile = tflite_profile(text)
    assert profile is not None and profile.runs == 50 and len(profile.rows) == 31
    # Timings (microseconds): ... avg=2.9499e+06 — the tool's per-run sum of node time,
    # printed to 5 significant digits; the 31 rows are printed to 1 µs each.
    assert profile.runtime_ms == pytest.approx(2949.9)
    assert profile.ops_ms == pytest.approx(profile.runtime_ms, rel=5e-4)
    assert "AllocateTensors" not in profile.by_type()  # the initialization section's
    summary = by_type(text)  # the tool's own "Summary by node type"
    assert set(summary) == set(profile.by_type())
    for node_type, ms in profile.by_type().items():
        assert ms == pytest.approx(summary[node_type], abs=0.001 * 16)
    slowest = profile.rows[0]
    assert slowest.node == "[MobilenetV1/MobilenetV1/Conv2d_5_pointwise/Relu6]:10"
    assert (slowest.op_type, slowest.exec) == ("CONV_2D", "builtin kernel")
    assert slowest.share == pytest.approx(0.09403, abs=5e-5)  # its [%] column: 9.403%


def test_a_phones_nnapi_partitions_match_its_percent_column() -> None:
    text = PHONE.read_text()
    profile = tflite_profile(text)
    assert profile is not None and profile.runs is None  # the author quoted no Timings
    assert len(profile.rows) == 8
    assert profile.ops_ms == pytest.approx(52.063)
    # The total the [%] column implies (row time / its share) is the rows' sum.
    assert profile.runtime_ms == pytest.approx(profile.ops_ms, rel=1e-3)
    table = regular_runs(text)
    assert table is not None
    for node_type, values, name in table.tables["Run Order"].rows:
        row = next(r for r in profile.rows if r.node == name)
        assert row.share == pytest.approx(values["%"] / 100, abs=5e-5)
        assert row.op_type == node_type
    delegate = [r for r in profile.rows if r.op_type == "TfLiteNnapiDelegate"]
    assert {r.node for r in delegate} == {
        "[MobilenetV2/expanded_conv_16/project/add_fold, aspp0/Relu]:71",
        "[image_pooling/Relu]:72", "[logits/semantic/BiasAdd]:73"}
    assert all("delegate partition" in (r.exec or "") for r in delegate)
    assert profile.by_type()["RESIZE_BILINEAR"] == pytest.approx(23.195)


def test_calls_per_run_multiply_the_mean_per_call() -> None:
    header = ("Operator-wise Profiling Info for Regular Benchmark Runs:\n"
              "============================== Run Order ==============================\n"
              "  [node type]  [first]  [avg ms]  [%]  [cdf%]  [mem KB]  [times called]  [Name]\n")
    # A row layout of builds since 2023 (no [start]); its kernel name holds spaces.
    row = ("  Convolution (NHWC, QC8) DWConv  0.428  0.051  4.317%  8.304%  0.000  13  "
           "Delegate/Convolution (NHWC, QC8) DWConv:1\n")
    profile = tflite_profile(header + row)
    assert profile is not None
    (only,) = profile.rows
    assert only.ms == pytest.approx(0.051 * 13)
    assert (only.op_type, only.exec) == ("Convolution (NHWC, QC8) DWConv", "XNNPACK")


def test_a_mangled_table_is_an_error_not_a_guess() -> None:
    text = PHONE.read_text()
    assert tflite_profile("no profile here\ncount=5 curr=3\n") is None
    cut = text.replace("\t        1\t[ArgMax]:70", "")  # a row missing its last columns
    with pytest.raises(ProfileLogError, match="does not have its 9 columns"):
        tflite_profile(cut)
    with pytest.raises(ProfileLogError, match="header"):
        tflite_profile(text.replace("[node type]", "[kind]"))
    with pytest.raises(ProfileLogError, match="over the"):
        tflite_profile("x" * 16_000_001)


# --- TensorRT trtexec --exportProfile ---------------------------------------------------

def test_trtexec_layers_add_up_to_its_total() -> None:
    text = TRT.read_text()
    count, layers = read(text)
    profile = trt_profile(text)
    assert profile.runs == count == 8657 and len(profile.rows) == len(layers) == 58
    # Σ averageMs (6 significant digits each) against trtexec's "Total" row, Σ timeMs / count.
    assert profile.runtime_ms == pytest.approx(sum(x.timeMs for x in layers) / count)
    assert profile.ops_ms == pytest.approx(profile.runtime_ms, rel=1e-4)
    assert sum(x.percentage for x in layers) == pytest.approx(100.0, abs=1e-3)
    for layer in layers:  # the tool's own share of each layer
        row = next(r for r in profile.rows if r.node == layer.name)
        assert row.share * 100 == pytest.approx(layer.percentage, abs=1e-3)
    assert profile.rows[0].ms == pytest.approx(0.0101366)  # the slowest layer's averageMs


def test_fused_layer_names_map_back_to_onnx_nodes() -> None:
    profile = trt_profile(TRT.read_text())
    groups = group_of(profile)
    first = "features.0.0.weight + QuantizeLinear_7 + Conv_9 + PWN(Clip_13)"
    assert groups["Clip_13"] == groups["Conv_9"] == groups["QuantizeLinear_7"] == first
    row = next(r for r in profile.rows if r.node == first)
    assert row.onnx_nodes == ["QuantizeLinear_7", "Conv_9", "Clip_13"] and row.fused
    assert row.op_type == "Conv+Clip"
    residual = next(r for r in profile.rows if r.node.endswith("Conv_121 + Add_123"))
    assert residual.op_type == "Conv+Add" and groups["Add_123"] == residual.node
    reformat = next(r for r in profile.rows if r.op_type == "Reformat")
    assert reformat.onnx_nodes == ["GlobalAveragePool_747"] and not reformat.fused
    assert "GlobalAveragePool_747" in groups and groups["GlobalAveragePool_747"] == \
        "GlobalAveragePool_747"  # the reformat feeds it; the node's own layer is its group
    lone = next(r for r in profile.rows if r.node == "QuantizeLinear_2")
    assert (lone.op_type, lone.fused) == ("QuantizeLinear", False)
    unnamed = next(r for r in profile.rows if r.node.startswith("copied_squeeze_after_"))
    assert unnamed.onnx_nodes is None and unnamed.op_type == "layer"
    assert "exporter node names" in (profile.note or "")
    assert parts("a + PWN(PWN(Sigmoid_1), Mul_2)") == ["a", "Sigmoid_1", "Mul_2"]


def _model(path: Path) -> Path:
    """A real ONNX file whose node names are the fused layer's: the model's own names
    decide which parts are nodes (its initializers are not)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    w = helper.make_tensor("features.0.0.weight", TensorProto.FLOAT, [4, 3, 1, 1], [0.1] * 12)
    nodes = [helper.make_node("Conv", ["x", "features.0.0.weight"], ["c"], name="Conv_9"),
             helper.make_node("Clip", ["c"], ["y"], name="Clip_13")]
    graph = helper.make_graph(nodes, "g", [x], [y], [w])
    onnx.save(helper.make_model(graph), str(path))
    return path


def test_the_model_beside_the_engine_decides_the_nodes(tmp_path: Path) -> None:
    nodes = onnx_node_types(_model(tmp_path / "model.onnx"))
    assert nodes == {"Conv_9": "Conv", "Clip_13": "Clip"}
    (tmp_path / "layers.json").write_text(TRT.read_text())
    profile = read_layers(tmp_path / "layers.json", tmp_path)
    row = next(r for r in profile.rows if r.node.startswith("features.0.0.weight + "))
    assert row.onnx_nodes == ["Conv_9", "Clip_13"] and row.op_type == "Conv+Clip"
    assert "model.onnx beside the engine" in (profile.note or "")
    # A LatencyRecord carries it as the device's profile (what a Jetson worker returns).
    record = read_record(LatencyRecord, {"n": 10, "mean": 0.3, "profile": profile.to_json()},
                         "trtexec's timing")
    assert record.profile == profile


def test_a_bad_profile_file_is_refused_by_name(tmp_path: Path) -> None:
    good = json.loads(TRT.read_text())
    with pytest.raises(LayerProfileError, match="unescaped"):
        read('[{"count": 1}, {"name": "a"b", "timeMs": 1}]')
    with pytest.raises(LayerProfileError, match="count"):
        read(json.dumps(good[1:]))
    with pytest.raises(LayerProfileError, match=r"entry 1 .*timeMs"):
        read(json.dumps([good[0], {**good[1], "timeMs": -1}]))
    with pytest.raises(LayerProfileError, match=r"entry 1 .*cmd: Extra inputs"):
        read(json.dumps([good[0], {**good[1], "cmd": "rm -rf /"}]))
    (tmp_path / "layers.json").write_text("[1, 2")
    assert (read_layers(tmp_path / "layers.json", tmp_path).unmeasurable or "").startswith(
        "not measured: trtexec's layer profile layers.json could not be read")
