"""SavedModel (from onnx-to-tf) -> .tflite at one precision, with tf.lite.TFLiteConverter.

onnx2tf can quantize too, but it always builds every variant at once and
swallows a failed one into a warning; the converter's own API builds exactly
the precision asked for and fails loudly. The settings follow the TFLite
post-training quantization guide:

| precision      | converter settings                                                        |
|----------------|---------------------------------------------------------------------------|
| float32        | none                                                                      |
| float16        | Optimize.DEFAULT, supported_types [float16] (weights fp16, compute fp32 on CPU) |
| dynamic-int8   | Optimize.DEFAULT, no representative data (int8 weights, float activations) |
| int8           | Optimize.DEFAULT, representative data, TFLITE_BUILTINS_INT8 only          |
| int16x8        | Optimize.DEFAULT, representative data, 16-bit activations / 8-bit weights |

An int8 build with nodes the INT8 rules keep float (keep_float.py) calibrates only,
then quantizes with those ops denylisted; without any it is the converter's own path.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgebuild.errors import StageError

if TYPE_CHECKING:
    import numpy as np

    from edgebuild.backends.tflite.keep_float import KeptFloat
    from edgebuild.backends.tflite.options import TfliteOptions

NEEDS_CALIBRATION = ("int8", "int16x8")


def convert(saved_model: Path, options: TfliteOptions,
            calibration: list[dict[str, np.ndarray]] | None,
            kept: KeptFloat | None = None) -> bytes:
    """The .tflite flatbuffer; `calibration`: feeds keyed by signature input name;
    `kept` (int8): the nodes to leave float, filled in with what was honoured."""
    import tensorflow as tf

    precision = options.precision.value
    converter = tf.lite.TFLiteConverter.from_saved_model(str(saved_model))
    if precision != "float32":
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
    if precision == "float16":
        converter.target_spec.supported_types = [tf.float16]
    if precision in NEEDS_CALIBRATION:
        if not calibration:
            raise StageError(f"tflite precision '{precision}' needs calibration data",
                             "set the target option calibration_dataset to a recipe dataset")
        converter.representative_dataset = _representative(calibration)
        # The converter's only switch for per-tensor weights is this private attribute
        # (onnx2tf sets it the same way).
        converter._experimental_disable_per_channel = not options.per_channel
    if precision == "int8":
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        io_type = {"int8": tf.int8, "uint8": tf.uint8, "float32": tf.float32}[
            options.io_type.value]
        converter.inference_input_type = io_type
        converter.inference_output_type = io_type
        if kept is not None and kept.names:
            return _convert(lambda: _keeping_float(converter, io_type, kept), precision)
    elif precision == "int16x8":
        converter.target_spec.supported_ops = [
            tf.lite.OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8]
    return _convert(converter.convert, precision)


def _convert(run: Any, precision: str) -> bytes:
    try:
        flatbuffer: Any = run()
    except Exception as exc:  # the converter raises many types; all mean the same here
        first = str(exc).strip().splitlines()[:3]
        raise StageError(f"TFLite conversion to {precision} failed: {type(exc).__name__}",
                         "\n".join(first) or "see the stage log") from None
    return bytes(flatbuffer)


def _keeping_float(converter: Any, io_type: Any, kept: KeptFloat) -> bytes:
    """Calibrate, then quantize with the kept nodes' ops denylisted (keep_float.py)."""
    from edgebuild.backends.tflite import keep_float

    converter._experimental_calibrate_only = True
    calibrated = bytes(converter.convert())
    return keep_float.quantize(calibrated, converter, io_type,
                               keep_float.denylist(calibrated, kept))


def _representative(feeds: list[dict[str, np.ndarray]]) -> Any:
    def generate() -> Iterator[dict[str, np.ndarray]]:
        yield from feeds
    return generate
