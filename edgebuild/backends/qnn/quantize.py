"""The QDQ model QNN's HTP runs: onnxruntime's QNN quantization recipe.

`qnn_preprocess_model` first (it fuses what the HTP wants fused, e.g. LayerNorm),
then `get_qnn_qdq_config`, which places Q/DQ the way the QNN EP consumes them and
inserts the type conversions HTP needs between 8- and 16-bit tensors. Calibration
feeds the recipe's dataset, as the quantize pass does for other backends.

Safe by default, as the quantize pass: the nodes edgebuild's INT8 rules keep float
(quant/safety.py — mixed-range Concat/Add, the output tail, a signal front
end) are the recipe's `nodes_to_exclude`. The HTP has no float32 kernels: the QNN EP
runs those nodes in fp16 on it (on the test detector all 68 nodes stayed on the HTP);
one it refuses is in the partition report. The metadata's `kept_float` lists them and why.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from edgebuild.errors import StageError

# precision -> (activation type, weight type), onnxruntime.quantization.QuantType names
RANGE_SAMPLES = 32  # calibration samples that measure the mixed-range rule's ranges

TYPES = {"int8": ("QUInt8", "QUInt8"), "int16": ("QUInt16", "QUInt8")}


def quantize_for_htp(source: Path, destination: Path, precision: str, samples: Any,
                     count: int, per_channel: bool, keep_float: str = "auto",
                     bound: float | None = 16.0) -> dict[str, Any]:
    """Write the QNN QDQ model of `source`; returns what was done, for the metadata.
    `keep_float` and `bound`: the INT8 rules' `keep_float` and `mixed_range_bound`."""
    from onnxruntime.quantization import CalibrationDataReader, QuantType, quantize
    from onnxruntime.quantization.execution_providers.qnn import (
        get_qnn_qdq_config,
        qnn_preprocess_model,
    )

    class Reader(CalibrationDataReader):  # type: ignore[misc]
        def __init__(self) -> None:
            self.feeds = iter(samples.feed(i) for i in range(min(count, len(samples))))

        def get_next(self) -> dict[str, Any] | None:
            return next(self.feeds, None)

    import onnx

    from edgebuild.quant.safety import float_nodes

    preprocessed = destination.with_name("preprocessed.onnx")
    upgraded = _opset_13(source, destination.with_name("opset13.onnx"))
    changed = qnn_preprocess_model(str(upgraded or source), str(preprocessed))
    model = preprocessed if changed else (upgraded or source)
    activation, weight = TYPES[precision]
    probe = [samples.feed(i) for i in range(min(RANGE_SAMPLES, count, len(samples)))]
    kept = float_nodes(onnx.load(str(model)), probe, keep_float, bound)
    if kept.names:
        kept.notes.append("kept out of the QDQ: the HTP runs float nodes at fp16 (it has no "
                          "fp32 kernels); qnn_partition.md shows any it refuses")
    try:
        config = get_qnn_qdq_config(str(model), Reader(),
                                    activation_type=getattr(QuantType, activation),
                                    weight_type=getattr(QuantType, weight),
                                    per_channel=per_channel, nodes_to_exclude=kept.names)
        quantize(str(model), str(destination), config)
    except Exception as exc:  # the quantizer's own message names what it refused
        raise StageError(f"QNN quantization ({precision}) failed: {type(exc).__name__}: "
                         f"{str(exc).splitlines()[0] if str(exc) else ''}",
                         "exclude the node it names, or try `precision: fp16`") from None
    finally:
        preprocessed.unlink(missing_ok=True)
        if upgraded is not None:
            upgraded.unlink(missing_ok=True)
    return {"activations": activation, "weights": weight, "per_channel": per_channel,
            "preprocessed": bool(changed), "calibration_samples": min(count, len(samples)),
            "kept_float": kept.to_json(),
            **({"opset_upgraded_to": 13} if upgraded is not None else {})}


def _opset_13(source: Path, destination: Path) -> Path | None:
    """`source` converted to opset 13 when it is older (None when it is not): Q/DQ with
    an `axis` (per-channel weights, and the bias QNN's config quantizes per channel)
    exists from opset 13; an opset-12 export (PaddleOCR's) loaded as an invalid model."""
    import onnx
    from onnx import version_converter

    model = onnx.load(str(source))
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 13)
    if opset >= 13:
        return None
    try:
        converted = version_converter.convert_version(model, 13)
    except Exception as exc:  # onnx names the op it has no adapter for
        raise StageError(f"the model is opset {opset}; QNN's Q/DQ needs opset 13, and onnx's "
                         f"version converter failed: {type(exc).__name__}: {exc}",
                         "re-export the model at opset 13 or later") from None
    onnx.save(converted, str(destination))
    return destination


def given_qdq(source: Path) -> dict[str, Any]:
    """`precision: qdq`: the model's own Q/DQ, checked for what the HTP takes; returns the
    metadata. Activations must be unsigned (uint8/uint16): the HTP emulator returned
    noise (logit cosine 0.08 against FP32 on EfficientNet-Lite0) for symmetric int8
    activations, TensorRT's kind (docs/benchmarks.md, "One set of Q/DQ encodings")."""
    import onnx
    from onnx import TensorProto

    model = onnx.load(str(source), load_external_data=False)
    inits = {i.name: i for i in model.graph.initializer}
    quantize = [n for n in model.graph.node if n.op_type == "QuantizeLinear"]
    if not quantize:
        raise StageError("precision qdq needs a model with Q/DQ nodes and this one has none",
                         "add a `quantize: {mode: static, calibration: <dataset>}` pass before "
                         "this target, or use `precision: int8` (QNN quantizes it itself)")
    signed = [n.name for n in quantize if len(n.input) > 2 and n.input[2] in inits
              and inits[n.input[2]].data_type in (TensorProto.INT8, TensorProto.INT16)]
    if signed:
        raise StageError(f"precision qdq: {len(signed)} QuantizeLinear node(s) give signed "
                         f"activations (first: {signed[0]}); the HTP takes uint8/uint16 "
                         "activations", "quantize with `activation_type: uint8` (the default; "
                         "not `preset: tensorrt`), or use `precision: int8`")
    dequantize = sum(1 for n in model.graph.node if n.op_type == "DequantizeLinear")
    return {"source": "the input's Q/DQ, as is", "quantize_nodes": len(quantize),
            "dequantize_nodes": dequantize}
