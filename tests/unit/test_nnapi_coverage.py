"""The NNAPI coverage table: decisions per API level, from the delegate's Validate rules.

The ops below are what TFLiteConverter writes for an EfficientNet-Lite0-like network
(see tests/integration/tflite/test_nnapi_ops.py, which reads them from real .tflite files).
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pytest

from edgebuild.backends.tflite import nnapi, nnapi_rules
from edgebuild.backends.tflite.nnapi import NOT_IN_TABLE, SOURCE, OpUse, Support, coverage
from edgebuild.errors import StageError

# Full-integer INT8 with float input/output, as TFLiteConverter writes it.
INT8_FLOAT_IO = [
    OpUse("QUANTIZE", 1, 1, input_type="float32", output_type="int8"),
    OpUse("CONV_2D", 3, 17, input_type="int8", output_type="int8",
          features=("fused RELU6", "per-channel weights")),
    OpUse("DEPTHWISE_CONV_2D", 3, 16, input_type="int8", output_type="int8",
          features=("fused RELU6",)),
    OpUse("ADD", 2, 9, input_type="int8", output_type="int8"),
    OpUse("MEAN", 2, 1, input_type="int8", output_type="int8"),
    OpUse("FULLY_CONNECTED", 4, 1, input_type="int8", output_type="int8",
          features=("per-channel weights",)),
    OpUse("RESHAPE", 1, 1, input_type="int8", output_type="int8"),
    OpUse("DEQUANTIZE", 2, 1, input_type="int8", output_type="float32",
          features=("asymmetric int8",)),
]
FLOAT32 = [
    OpUse("CONV_2D", 1, 17, input_type="float32", output_type="float32",
          features=("fused RELU6",)),
    OpUse("DEPTHWISE_CONV_2D", 1, 16, input_type="float32", output_type="float32",
          features=("fused RELU6",)),
    OpUse("ADD", 1, 9, input_type="float32", output_type="float32"),
    OpUse("MEAN", 1, 1, input_type="float32", output_type="float32"),
    OpUse("FULLY_CONNECTED", 1, 1, input_type="float32", output_type="float32"),
    OpUse("RESHAPE", 1, 1, input_type="float32", output_type="float32"),
]


def verdicts(ops: list[OpUse], api: int) -> dict[str, str]:
    return {r.op: r.supported.value for r in coverage(ops, api)}


def test_efficientnet_lite0_int8_by_api_level() -> None:
    assert verdicts(INT8_FLOAT_IO, 27) == {
        "QUANTIZE": "no", "CONV_2D": "no", "DEPTHWISE_CONV_2D": "no", "ADD": "yes",
        "MEAN": "no", "FULLY_CONNECTED": "no", "RESHAPE": "yes", "DEQUANTIZE": "no"}
    # API 29: int8 compute runs (as uint8), but the float<->int8 edges stay on the CPU.
    assert verdicts(INT8_FLOAT_IO, 29) == {
        "QUANTIZE": "no", "CONV_2D": "yes", "DEPTHWISE_CONV_2D": "yes", "ADD": "yes",
        "MEAN": "yes", "FULLY_CONNECTED": "yes", "RESHAPE": "yes", "DEQUANTIZE": "no"}
    assert set(verdicts(INT8_FLOAT_IO, 30).values()) == {"yes"}


def test_int8_rows_say_why_and_what_level() -> None:
    rows = {r.op: r for r in coverage(INT8_FLOAT_IO, 27)}
    conv = rows["CONV_2D"]
    assert conv.min_api == 29
    assert conv.note == "int8 input, per-channel weights need API 29 (NNAPI 1.2)"
    assert rows["QUANTIZE"].min_api == 30
    assert "int8 output needs API 30 (NNAPI 1.3)" in rows["QUANTIZE"].note
    assert rows["DEQUANTIZE"].min_api == 30
    assert "zero point 0 only" in rows["DEQUANTIZE"].note
    # Below API 30 the delegate shifts int8 to uint8; the note says so where it applies.
    at29 = {r.op: r for r in coverage(INT8_FLOAT_IO, 29)}
    assert "int8 runs as uint8 below API 30" in at29["CONV_2D"].note
    assert at29["QUANTIZE"].note == "int8 output needs API 30 (NNAPI 1.3)"
    assert all(r.note == "" for r in coverage(INT8_FLOAT_IO, 30))


def test_float_model_needs_api_28_for_mean_only() -> None:
    assert verdicts(FLOAT32, 27) == {
        "CONV_2D": "yes", "DEPTHWISE_CONV_2D": "yes", "ADD": "yes", "MEAN": "no",
        "FULLY_CONNECTED": "yes", "RESHAPE": "yes"}
    mean = next(r for r in coverage(FLOAT32, 27) if r.op == "MEAN")
    assert (mean.min_api, mean.note) == (28, "the op needs API 28 (NNAPI 1.1)")
    assert set(verdicts(FLOAT32, 28).values()) == {"yes"}


def test_symmetric_int8_dequantize_runs_at_29_uint8_quantize_too() -> None:
    ops = [OpUse("DEQUANTIZE", 2, 1, input_type="int8", output_type="float32"),
           OpUse("QUANTIZE", 1, 1, input_type="float32", output_type="uint8")]
    assert verdicts(ops, 28) == {"DEQUANTIZE": "no", "QUANTIZE": "no"}
    assert verdicts(ops, 29) == {"DEQUANTIZE": "yes", "QUANTIZE": "yes"}


def test_fp16_weights_are_folded_non_constant_fp16_needs_30() -> None:
    folded = coverage([OpUse("DEQUANTIZE", 3, 5, input_type="float16", output_type="float32",
                             features=("constant input",))], 27)[0]
    assert folded.supported is Support.YES and folded.min_api == 27
    assert "folds" in folded.note
    live = OpUse("DEQUANTIZE", 2, 1, input_type="float16", output_type="float32")
    assert coverage([live], 29)[0].supported is Support.NO
    assert coverage([live], 30)[0].supported is Support.YES


def test_unknown_custom_and_too_new_ops_fall_back_to_cpu() -> None:
    rows = coverage([OpUse("GELU", 1, 2, input_type="float32", output_type="float32"),
                     OpUse("MyCustomOp", 1, 1, custom=True),
                     OpUse("FULLY_CONNECTED", 12, 2, input_type="float32",
                           output_type="float32",
                           features=("hybrid (float input, int8 weights)",))], 35)
    gelu, custom, fc = rows
    assert (gelu.supported, gelu.min_api, gelu.note) == (Support.NO, None, NOT_IN_TABLE)
    assert custom.supported is Support.NO and "custom op" in custom.note
    assert fc.supported is Support.NO and fc.min_level == "never"
    assert fc.note.startswith("op version 12 > 5")


def test_hard_swish_is_lowered_below_api_30() -> None:
    op = [OpUse("HARD_SWISH", 1, 1, input_type="float32", output_type="float32")]
    at27, at30 = coverage(op, 27)[0], coverage(op, 30)[0]
    assert at27.supported is at30.supported is Support.YES
    assert at27.min_api == 27 and "lowers it into basic NNAPI ops" in at27.note


def test_feature_level_6_ops_are_not_decided_by_api_level() -> None:
    op = [OpUse("BATCH_MATMUL", 1, 1, input_type="float32", output_type="float32")]
    at30, at34 = coverage(op, 30)[0], coverage(op, 34)[0]
    assert at30.supported is Support.NO
    assert at34.supported is Support.CONDITIONAL
    assert at34.min_api is None and at34.min_level == "NNAPI feature level 6"
    assert "not tied to an API level" in at34.note


def test_checked_facts_move_the_level_or_refuse() -> None:
    rows = coverage([
        OpUse("CONV_2D", 1, 1, input_type="float32", output_type="float32",
              features=("dilated",)),
        OpUse("FULLY_CONNECTED", 5, 1, input_type="float32", output_type="float32",
              features=("keep_num_dims",)),
        OpUse("CONCATENATION", 1, 1, input_type="float32", output_type="float32",
              features=("fused RELU",)),
        OpUse("ADD", 1, 1, input_type="float32", output_type="float32",
              features=("rank>4",)),
        OpUse("RESIZE_BILINEAR", 3, 1, input_type="float32", output_type="float32",
              features=("half_pixel_centers",)),
        OpUse("GATHER", 1, 1, input_type="float32", output_type="float32",
              features=("int64 indices",)),
    ], 29)
    conv, fc, concat, add, resize, gather = rows
    assert (conv.supported, conv.min_api) == (Support.YES, 29)
    assert (fc.supported, fc.min_api) == (Support.NO, 30)
    assert concat.supported is Support.NO and "fused RELU refused" in concat.note
    assert add.supported is Support.NO and "rank <= 4" in add.note
    assert (resize.supported, resize.min_api) == (Support.NO, 30)
    assert gather.supported is Support.NO and "int32" in gather.note


def test_fusions_nnapi_cannot_express_and_unchecked_values_are_conditional() -> None:
    tanh = coverage([OpUse("CONV_2D", 1, 1, input_type="float32", output_type="float32",
                           features=("fused TANH",))], 30)[0]
    assert tanh.supported is Support.CONDITIONAL and "FuseCode" in tanh.note
    uint8 = coverage([OpUse("CONV_2D", 1, 1, input_type="uint8", output_type="uint8")], 27)[0]
    assert uint8.supported is Support.CONDITIONAL and "output_scale" in uint8.note
    assert coverage([OpUse("CONV_2D", 1, 1, input_type="uint8", output_type="uint8")],
                    29)[0].supported is Support.YES
    # An op the delegate does not convert int8 for gets it as TENSOR_QUANT8_SYMM below 30.
    squeeze = [OpUse("SQUEEZE", 1, 1, input_type="int8", output_type="int8")]
    assert coverage(squeeze, 28)[0].supported is Support.CONDITIONAL
    assert "TENSOR_QUANT8_SYMM" in coverage(squeeze, 28)[0].note
    assert coverage(squeeze, 30)[0].supported is Support.YES


def test_mul_v3_needs_named_devices_which_api_29_uses_by_default() -> None:
    mul = [OpUse("MUL", 3, 1, input_type="float32", output_type="float32")]
    assert coverage(mul, 28)[0].supported is Support.NO
    assert coverage(mul, 29)[0].supported is Support.YES
    assert coverage([OpUse("MUL", 4, 1, input_type="float32")], 30)[0].min_level == "never"


def test_below_api_27_there_is_no_nnapi() -> None:
    rows = coverage(FLOAT32, 26)
    assert {r.supported for r in rows} == {Support.NO}
    assert "API 27" in rows[0].note


def test_the_table_covers_common_cnn_and_transformer_ops() -> None:
    for op in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "ADD", "MUL", "SUB", "DIV",
               "AVERAGE_POOL_2D", "MAX_POOL_2D", "MEAN", "RESHAPE", "SOFTMAX", "LOGISTIC",
               "TANH", "RELU", "RELU6", "HARD_SWISH", "CONCATENATION", "PAD", "TRANSPOSE",
               "QUANTIZE", "DEQUANTIZE", "BATCH_MATMUL", "GATHER", "STRIDED_SLICE",
               "RESIZE_BILINEAR", "SQUEEZE", "SPLIT", "EXPAND_DIMS", "PACK", "RSQRT"):
        assert op in nnapi.RULES, op
    levels = {nnapi_rules.API27, nnapi_rules.API28, nnapi_rules.API29, nnapi_rules.API30,
              nnapi_rules.FL6, nnapi_rules.FL7}
    for name, rule in nnapi.RULES.items():
        assert rule.min_level in levels, name
        assert set(rule.types.values()) <= levels, name


def test_rows_serialise_to_json_for_the_report() -> None:
    rows = coverage(INT8_FLOAT_IO, 29)
    data = json.loads(json.dumps([asdict(r) for r in rows]))
    assert data[1]["supported"] == "yes" and data[1]["features"] == ["fused RELU6",
                                                                   "per-channel weights"]


def test_render_markdown_names_source_counts_and_deprecation() -> None:
    rows = coverage([*INT8_FLOAT_IO, OpUse("GELU", 1, 1, input_type="float32")], 35)
    text = nnapi.render_markdown(rows, 35)
    assert text.startswith("### NNAPI delegate coverage at Android API 35")
    nodes = sum(op.count for op in INT8_FLOAT_IO) + 1
    assert f"{nodes - 1} of {nodes} nodes pass" in text
    assert SOURCE in text and "nnapi_delegate.cc" in SOURCE
    assert "deprecated from Android 15" in text and "migration-guide" in text
    assert "| CONV_2D | v3 | int8 → int8 | fused RELU6, per-channel weights | 17 | yes |" in text
    header, divider = text.splitlines()[4:6]
    assert header.count("|") == divider.count("|")
    escaped = nnapi.render_markdown(
        [nnapi.CoverageRow("X", 1, 1, "", "", (), Support.NO, None, "—", "—", "a|b")], 30)
    assert "a\\|b" in escaped


def test_model_ops_rejects_a_file_that_is_not_tflite(tmp_path: Path) -> None:
    bogus = tmp_path / "model.onnx"
    bogus.write_bytes(b"\x08\x07\x12\x04onnx-not-tflite")
    with pytest.raises(StageError, match="not a TFLite model"):
        nnapi.model_ops(bogus)
