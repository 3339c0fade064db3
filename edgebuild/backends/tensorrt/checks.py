"""What TensorRT insists on in an explicit-quantization ONNX, checked here before the
device sees it."""

from __future__ import annotations

from typing import Any

from edgebuild.errors import StageError


def check_qdq(model: Any) -> dict[str, Any]:
    """The Q/DQ facts TensorRT insists on: there are some, and every quantization is
    symmetric int8 (zero point 0). Raises StageError naming the first that is not."""
    from onnx import TensorProto, numpy_helper

    inits = {i.name: i for i in model.graph.initializer}
    quantize = [n for n in model.graph.node if n.op_type == "QuantizeLinear"]
    if not quantize:
        raise StageError("precision int8 needs explicit Q/DQ nodes and the model has none",
                         "add `- quantize: {preset: tensorrt, calibration: <dataset>}` to the "
                         "target's passes (TensorRT 10+ has no implicit INT8 calibration)")
    for node in quantize:
        zero = inits.get(node.input[2]) if len(node.input) > 2 and node.input[2] else None
        if zero is None or zero.data_type != TensorProto.INT8 or \
                numpy_helper.to_array(zero).any():
            kind = "uint8" if zero is None or zero.data_type == TensorProto.UINT8 else \
                "a non-zero zero point"
            raise StageError(f"TensorRT takes symmetric int8 Q/DQ only; QuantizeLinear "
                             f"'{node.name}' is {kind}",
                             "quantize with `preset: tensorrt` (symmetric int8 activations)")
    dequantize = sum(1 for n in model.graph.node if n.op_type == "DequantizeLinear")
    return {"quantize_nodes": len(quantize), "dequantize_nodes": dequantize}
