"""Kernels of the `local_window_attention` custom op for the runtimes that lack it.

Each one computes what the PyTorch op in window_attention.py computes; the
banded mask is a large finite negative number instead of -inf (exp() gives 0
either way in float32, and a finite value survives FP16 paths).

- `onnxruntime_kernel`: numpy, run by onnxruntime-extensions;
- `openvino_conversion`: the node rebuilt from OpenVINO opset13 ops;
- `decomposition`: the node rebuilt from standard ONNX ops at export (TFLite).

Vendor modules are imported inside each function: a runtime only loads its own.
"""

from __future__ import annotations

import math
from typing import Any

MASKED = -1.0e4  # added to scores outside the band: their softmax weight is 0


def band_bias(length: int, window: int) -> Any:
    """length x length float32: 0 where |i - j| <= window, MASKED elsewhere."""
    import numpy as np

    position = np.arange(length)
    inside = np.abs(position[:, None] - position[None, :]) <= window
    return np.where(inside, 0.0, MASKED).astype(np.float32)


def onnxruntime_kernel(q: Any, k: Any, v: Any, window: int) -> Any:
    import numpy as np

    scores = q @ np.swapaxes(k, -1, -2) / np.float32(math.sqrt(q.shape[-1]))
    scores = scores + band_bias(q.shape[-2], window)
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights /= weights.sum(axis=-1, keepdims=True)
    return (weights @ v).astype(np.float32)


def openvino_conversion(node: Any) -> Any:
    """ConversionExtension body: the ONNX node's inputs -> OpenVINO ops' outputs."""
    import numpy as np
    import openvino.opset13 as ops

    q, k, v = node.get_input(0), node.get_input(1), node.get_input(2)
    window = node.get_attribute("window")
    shape = q.get_partial_shape()
    length, dim = shape[1].get_length(), shape[2].get_length()  # static: tokens, width
    scores = ops.matmul(q, k, transpose_a=False, transpose_b=True)
    scores = ops.multiply(scores, ops.constant(np.float32(1 / math.sqrt(dim))))
    scores = ops.add(scores, ops.constant(band_bias(length, window)))
    return ops.matmul(ops.softmax(scores, -1), v, False, False).outputs()


def decomposition(g: Any, q: Any, k: Any, v: Any, window: int) -> Any:
    """Legacy-exporter symbolic: the op from standard ONNX ops.

    The sizes are read from the graph (Shape), not from the traced types: inside a
    symbolic the exporter does not know them yet. With the model's static token
    count, onnx-optimize folds the mask and the scale into constants, so the graph
    onnx2tf converts is MatMul, Mul, Add, Softmax, MatMul.
    """
    import torch

    def const(value: Any, dtype: Any = torch.int64) -> Any:
        return g.op("Constant", value_t=torch.tensor(value, dtype=dtype))

    shape = g.op("Shape", q)
    length = g.op("Gather", shape, const(1), axis_i=0)
    dim = g.op("Cast", g.op("Gather", shape, const(2), axis_i=0), to_i=1)  # 1: FLOAT
    scale = g.op("Div", const(1.0, torch.float32), g.op("Sqrt", dim))
    position = g.op("Range", const(0), length, const(1))
    distance = g.op("Abs", g.op("Sub", g.op("Unsqueeze", position, const([1])),
                                g.op("Unsqueeze", position, const([0]))))
    bias = g.op("Where", g.op("LessOrEqual", distance, const(window)),
                const(0.0, torch.float32), const(MASKED, torch.float32))
    scores = g.op("MatMul", q, g.op("Transpose", k, perm_i=[0, 2, 1]))
    scores = g.op("Add", g.op("Mul", scores, scale), bias)
    return g.op("MatMul", g.op("Softmax", scores, axis_i=-1), v)
