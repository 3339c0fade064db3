"""A small MobileNet-style ONNX model (BN folded) for the quantization-lever tests.

    x ─ Conv1x1 expand ─ Clip(0,6) ─ DWConv3x3 ─ Clip(0,6) ─ Conv1x1 project ─ Add(x) ─ head

Channel scales spread over three orders of magnitude, as batch-norm folding
leaves them in real depthwise-separable networks; a few expand channels have
a large bias so that their ReLU6 always clips.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

C_IN, HIDDEN, CLASSES, SIZE = 8, 24, 10, 12
INPUT_RANGE = (-1.0, 1.0)


def build(path: Path, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    gain = np.exp(rng.uniform(np.log(0.01), np.log(10.0), HIDDEN)).astype(np.float32)
    expand = rng.standard_normal((HIDDEN, C_IN, 1, 1)).astype(np.float32) * gain[:, None, None,
                                                                                None]
    expand_bias = rng.uniform(-1, 1, HIDDEN).astype(np.float32)
    expand_bias[:3] = 50.0  # always clipped at 6
    depthwise = rng.standard_normal((HIDDEN, 1, 3, 3)).astype(np.float32) / gain[:, None, None,
                                                                                  None]
    project = (rng.standard_normal((C_IN, HIDDEN, 1, 1)) * 0.3).astype(np.float32)
    head = rng.standard_normal((CLASSES, C_IN, 1, 1)).astype(np.float32)
    inits = {
        "expand_w": expand, "expand_b": expand_bias,
        "dw_w": depthwise, "dw_b": rng.uniform(-0.5, 0.5, HIDDEN).astype(np.float32),
        "project_w": project, "project_b": np.zeros(C_IN, np.float32),
        "head_w": head, "head_b": np.zeros(CLASSES, np.float32),
        "zero": np.array(0.0, np.float32), "six": np.array(6.0, np.float32),
    }
    nodes = [
        helper.make_node("Conv", ["x", "expand_w", "expand_b"], ["e"], name="expand"),
        helper.make_node("Clip", ["e", "zero", "six"], ["e6"], name="expand_clip"),
        helper.make_node("Conv", ["e6", "dw_w", "dw_b"], ["d"], name="depthwise",
                         group=HIDDEN, pads=[1, 1, 1, 1]),
        helper.make_node("Clip", ["d", "zero", "six"], ["d6"], name="depthwise_clip"),
        helper.make_node("Conv", ["d6", "project_w", "project_b"], ["p"], name="project"),
        helper.make_node("Add", ["p", "x"], ["r"], name="residual"),
        helper.make_node("Conv", ["r", "head_w", "head_b"], ["h"], name="head"),
        helper.make_node("GlobalAveragePool", ["h"], ["g"], name="pool"),
        helper.make_node("Flatten", ["g"], ["logits"], name="flatten"),
    ]
    graph = helper.make_graph(
        nodes, "mbconv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, C_IN, SIZE, SIZE])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [None, CLASSES])],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def inputs(count: int, seed: int = 1) -> np.ndarray:
    """Inputs spanning INPUT_RANGE (both ends included, as 8-bit images would)."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(*INPUT_RANGE, (count, C_IN, SIZE, SIZE)).astype(np.float32)
    x[0, :, 0, 0], x[0, :, 0, 1] = INPUT_RANGE
    return x


def run(path: Path, x: np.ndarray, level: str = "all") -> np.ndarray:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = {"all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
                                   "none": ort.GraphOptimizationLevel.ORT_DISABLE_ALL}[level]
    so.log_severity_level = 3
    session = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    return np.asarray(session.run(None, {"x": x})[0])
