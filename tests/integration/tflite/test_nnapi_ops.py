"""NNAPI coverage on real .tflite files written here by TFLiteConverter.

A small EfficientNet-Lite-like block (conv + BN + ReLU6, depthwise, residual add, global
average pool, dense, softmax) converted to float32, float16 weights, full-integer INT8
with float I/O and with int8 I/O; and a small attention-like graph (dense on rank 3,
batch matmul, GELU, hard-swish) as float32 and dynamic-range INT8.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from edgebuild.backends.tflite.nnapi import OpUse, Support, coverage, model_ops, render_markdown

tf: Any = pytest.importorskip(
    "tensorflow", reason="the NNAPI coverage tests convert Keras models with TFLiteConverter; "
    "install tensorflow-cpu (extra: tflite)")
pytest.importorskip("ai_edge_litert", reason="model_ops reads .tflite files with the schema "
                    "shipped in ai-edge-litert (extra: tflite)")
pytestmark = [pytest.mark.tflite,
              pytest.mark.filterwarnings("ignore:Statistics for quantized inputs:UserWarning")]


def lite_block() -> Any:
    keras = tf.keras
    inp = keras.Input((32, 32, 3), batch_size=1)
    x = keras.layers.Conv2D(8, 3, strides=2, padding="same")(inp)
    x = keras.layers.BatchNormalization()(x)
    x = keras.layers.ReLU(6.0)(x)
    y = keras.layers.DepthwiseConv2D(3, padding="same")(x)
    y = keras.layers.ReLU(6.0)(y)
    y = keras.layers.Conv2D(8, 1)(y)
    x = keras.layers.Add()([x, y])
    x = keras.layers.GlobalAveragePooling2D()(x)
    x = keras.layers.Dense(10)(x)
    out = keras.layers.Softmax()(x)
    return keras.Model(inp, out)


def attention_block() -> Any:
    keras = tf.keras
    inp = keras.Input((8, 32), batch_size=1)
    q = keras.layers.Dense(64)(inp)
    k = keras.layers.Dense(64)(inp)
    scores = keras.layers.Lambda(lambda t: tf.matmul(t[0], t[1], transpose_b=True))([q, k])
    scores = keras.layers.Softmax()(scores)
    h = keras.layers.Lambda(lambda t: tf.nn.gelu(t))(q)
    h = keras.layers.Lambda(lambda t: t * tf.nn.relu6(t + 3.0) / 6.0)(h)  # -> HARD_SWISH
    out = keras.layers.Lambda(lambda t: tf.reduce_mean(t[0], axis=-1)
                              + tf.reduce_mean(t[1], axis=-1))([scores, h])
    return keras.Model(inp, out)


def representative() -> Iterator[list[np.ndarray]]:
    rng = np.random.default_rng(0)
    for _ in range(8):
        yield [rng.standard_normal((1, 32, 32, 3)).astype(np.float32)]


def convert(model: Any, path: Path, setup: Callable[[Any], None] | None = None) -> Path:
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    if setup is not None:
        setup(converter)
    path.write_bytes(converter.convert())
    return path


def full_int8(io_type: Any) -> Callable[[Any], None]:
    def setup(converter: Any) -> None:
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.representative_dataset = representative
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        if io_type is not None:
            converter.inference_input_type = io_type
            converter.inference_output_type = io_type
    return setup


def fp16(converter: Any) -> None:
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.target_spec.supported_types = [tf.float16]


def dynamic_range(converter: Any) -> None:
    converter.optimizations = [tf.lite.Optimize.DEFAULT]


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("nnapi")
    lite, attention = lite_block(), attention_block()
    return {
        "float32": convert(lite, out / "float32.tflite"),
        "float16": convert(lite, out / "float16.tflite", fp16),
        "int8": convert(lite, out / "int8.tflite", full_int8(None)),
        "int8_io": convert(lite, out / "int8_io.tflite", full_int8(tf.int8)),
        "uint8_io": convert(lite, out / "uint8_io.tflite", full_int8(tf.uint8)),
        "attention": convert(attention, out / "attention.tflite"),
        "attention_dynamic": convert(attention, out / "attention_dyn.tflite", dynamic_range),
    }


def by_op(ops: list[OpUse]) -> dict[str, list[OpUse]]:
    found: dict[str, list[OpUse]] = {}
    for op in ops:
        found.setdefault(op.name, []).append(op)
    return found


def verdicts(path: Path, api: int) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for row in coverage(model_ops(path), api):
        found.setdefault(row.op, set()).add(row.supported.value)
    return found


def test_model_ops_reads_names_versions_types_and_facts(models: dict[str, Path]) -> None:
    ops = model_ops(models["int8"])
    assert [op.name for op in ops] == ["QUANTIZE", "CONV_2D", "DEPTHWISE_CONV_2D", "CONV_2D",
                                      "ADD", "MEAN", "FULLY_CONNECTED", "SOFTMAX",
                                      "DEQUANTIZE"]
    assert sum(op.count for op in ops) == 9
    quantize, conv, depthwise, *_, dequantize = ops
    assert (quantize.input_type, quantize.output_type) == ("float32", "int8")
    assert (conv.version, conv.input_type, conv.output_type) == (3, "int8", "int8")
    # BatchNorm folds into the conv and the ReLU6 fuses into it.
    assert conv.features == ("fused RELU6", "per-channel weights")
    assert depthwise.features == ("fused RELU6",)
    assert dequantize.features == ("asymmetric int8",)
    assert not any(op.custom for op in ops)


def test_float_and_fp16_models(models: dict[str, Path]) -> None:
    ops = by_op(model_ops(models["float32"]))
    assert ops["CONV_2D"][0].input_type == "float32" and ops["CONV_2D"][0].version == 1
    assert verdicts(models["float32"], 27)["MEAN"] == {"no"}
    assert set().union(*verdicts(models["float32"], 28).values()) == {"yes"}
    fp16_ops = by_op(model_ops(models["float16"]))
    (dequantize,) = fp16_ops["DEQUANTIZE"]
    assert (dequantize.input_type, dequantize.features) == ("float16", ("constant input",))
    assert dequantize.count == 5  # one per weight / bias tensor
    assert verdicts(models["float16"], 28)["DEQUANTIZE"] == {"yes"}


def test_full_int8_by_api_level(models: dict[str, Path]) -> None:
    at27 = verdicts(models["int8"], 27)
    assert at27["CONV_2D"] == at27["DEPTHWISE_CONV_2D"] == {"no"}
    assert at27["ADD"] == at27["SOFTMAX"] == {"yes"}  # int8 shifted to uint8
    at29 = verdicts(models["int8"], 29)
    assert at29["CONV_2D"] == at29["FULLY_CONNECTED"] == at29["MEAN"] == {"yes"}
    assert at29["QUANTIZE"] == at29["DEQUANTIZE"] == {"no"}  # signed int8 at the edges
    assert set().union(*verdicts(models["int8"], 30).values()) == {"yes"}
    # With int8 input/output there are no float edges: all of it runs from API 29.
    assert set().union(*verdicts(models["int8_io"], 29).values()) == {"yes"}
    assert "QUANTIZE" not in verdicts(models["int8_io"], 29)
    # uint8 I/O wraps the same int8 graph: uint8 -> int8 needs 30, int8 -> uint8 29.
    edges = {(r.input_type, r.output_type): r.supported.value
             for r in coverage(model_ops(models["uint8_io"]), 29) if r.op == "QUANTIZE"}
    assert edges == {("uint8", "int8"): "no", ("int8", "uint8"): "yes"}


def test_attention_graph_gelu_batch_matmul_and_dynamic_range(models: dict[str, Path]
                                                             ) -> None:
    ops = by_op(model_ops(models["attention"]))
    assert ops["FULLY_CONNECTED"][0].features == ("keep_num_dims",)
    assert ops["SOFTMAX"][0].features == ("rank 1 or 3",)
    assert "HARD_SWISH" in ops and "GELU" in ops and "BATCH_MATMUL" in ops
    rows = {r.op: r for r in coverage(model_ops(models["attention"]), 30)}
    assert rows["GELU"].supported is Support.NO
    assert "not in the delegate's table" in rows["GELU"].note
    assert rows["BATCH_MATMUL"].supported is Support.NO
    assert rows["FULLY_CONNECTED"].supported is Support.YES  # keep_num_dims: API 30
    assert rows["HARD_SWISH"].supported is Support.YES
    later = {r.op: r for r in coverage(model_ops(models["attention"]), 33)}
    assert later["BATCH_MATMUL"].supported is Support.CONDITIONAL  # NNAPI feature level 6
    dynamic = by_op(model_ops(models["attention_dynamic"]))["FULLY_CONNECTED"][0]
    assert "hybrid (float input, int8 weights)" in dynamic.features
    row = coverage([dynamic], 35)[0]
    if dynamic.version > 5:  # what current converters write: newer than the delegate knows
        assert row.supported is Support.NO and "op version" in row.note


def test_report_table_for_a_real_model(models: dict[str, Path]) -> None:
    text = render_markdown(coverage(model_ops(models["int8"]), 29), 29)
    assert "7 of 9 nodes pass" in text
    assert "| QUANTIZE | v1 | float32 → int8 |" in text
