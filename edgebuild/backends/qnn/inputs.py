"""Integer image inputs for the HTP at fp16: the input `Cast` becomes a DequantizeLinear.

`model.prepost` gives a detector a uint8 image input whose first node is
`Cast(uint8 -> float)`. On the HTP at fp16 (onnxruntime-qnn 2.7, the x86 emulator) that
Cast loses the image: the YOLO-family recipe's fp16 build returned class scores of exactly
0 and boxes of a blank input, while the same graph fed float pixels agreed with FP32
(scores within 0.012). `DequantizeLinear(x, scale 1, zero point 0)` is the same function
(x · 1 − 0), and a graph input's DequantizeLinear is what the EP runs on the CPU by design
(its graph I/O quantization), so the HTP gets the float pixels.
"""

from __future__ import annotations

from pathlib import Path

_INTEGER = (2, 3)  # TensorProto.UINT8, TensorProto.INT8


def dequantize_cast_inputs(source: Path, destination: Path) -> list[str]:
    """Write `destination` with each graph input's Cast from (u)int8 to float replaced by a
    DequantizeLinear of scale 1 and zero point 0; return those inputs (none: no file)."""
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper

    model = onnx.load(str(source))
    graph = model.graph
    kinds = {i.name: i.type.tensor_type.elem_type for i in graph.input}
    done = []
    for index, node in enumerate(graph.node):
        if (node.op_type != "Cast" or node.domain not in ("", "ai.onnx")
                or kinds.get(node.input[0]) not in _INTEGER):
            continue
        target = next(a.i for a in node.attribute if a.name == "to")
        if target != onnx.TensorProto.FLOAT:
            continue
        name = node.input[0]
        dtype = np.uint8 if kinds[name] == onnx.TensorProto.UINT8 else np.int8
        scale, zero = f"{name}_dq_scale", f"{name}_dq_zero_point"
        graph.initializer.extend([numpy_helper.from_array(np.array(1.0, np.float32), scale),
                                  numpy_helper.from_array(np.array(0, dtype), zero)])
        graph.node.remove(node)
        graph.node.insert(index, helper.make_node(
            "DequantizeLinear", [name, scale, zero], list(node.output),
            name=node.name or f"{name}_dequantize"))
        done.append(name)
    if done:
        onnx.checker.check_model(model)
        onnx.save(model, str(destination))
    return done
