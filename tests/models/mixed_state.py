"""A recurrent step whose state mixes ranges, as Silero VAD's does (issue 40): one LSTM
step, its state `[2, 1, H]` holding h (tanh-bounded, |h| ≤ 1) stacked on c (the cell,
which a forget gate near 1 lets grow to tens), an input and an output of the model.

x `[1, F]` and state `[2, 1, H]` in; the probability p `[1, 1]` and the next state
stateN `[2, 1, H]` out. Written with onnx's helper: the weights are set (seeded), so
every build of it is the same model.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

HIDDEN, FEATURES, STEPS = 16, 8, 40


def write_model(path: Path) -> Path:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    h = HIDDEN
    # ONNX LSTM gate order: input, output, forget, cell. The forget gate's bias keeps it
    # near 1 and the cell's bias gives each unit one sign, so c accumulates to ~20-40
    # over a sequence while h = o * tanh(c) stays within 1.
    bias = np.zeros((1, 8 * h))
    bias[0, 0:h] = 3.0                                     # input gate open
    bias[0, 2 * h:3 * h] = 4.0                             # forget gate ~0.98
    bias[0, 3 * h:4 * h] = rng.choice([-1.5, 1.5], h)      # cell candidate, one sign a unit
    weights = {
        "W": rng.standard_normal((1, 4 * h, FEATURES)) * 0.3,
        "R": rng.standard_normal((1, 4 * h, h)) * 0.1,
        "B": bias,
        "Wo": rng.standard_normal((h, 1)) * 0.5,
    }
    axes = numpy_helper.from_array(np.array([0], np.int64), "axes")
    nodes = [
        helper.make_node("Unsqueeze", ["x", "axes"], ["x3"]),
        helper.make_node("Split", ["state"], ["h0", "c0"], axis=0, num_outputs=2),
        helper.make_node("LSTM", ["x3", "W", "R", "B", "", "h0", "c0"], ["y", "hn", "cn"],
                         hidden_size=h),
        helper.make_node("Concat", ["hn", "cn"], ["stateN"], axis=0),
        helper.make_node("Squeeze", ["hn", "axes"], ["h2"]),
        helper.make_node("MatMul", ["h2", "Wo"], ["logit"]),
        helper.make_node("Sigmoid", ["logit"], ["p"]),
    ]
    graph = helper.make_graph(
        nodes, "mixed_state_step",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, FEATURES]),
         helper.make_tensor_value_info("state", TensorProto.FLOAT, [2, 1, h])],
        [helper.make_tensor_value_info("p", TensorProto.FLOAT, [1, 1]),
         helper.make_tensor_value_info("stateN", TensorProto.FLOAT, [2, 1, h])],
        [numpy_helper.from_array(v.astype(np.float32), k) for k, v in weights.items()]
        + [axes])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def write_features(path: Path, sequences: int = 2) -> Path:
    """`sequences` sequences of STEPS steps of features, `x` [sequences, F * STEPS]."""
    x = np.random.default_rng(1).standard_normal((sequences, FEATURES * STEPS))
    np.savez(path, x=x.astype(np.float32))
    return path


RECIPE = """\
name: mixed-state
model: {onnx: step.onnx}
inputs:
  - {name: x, shape: [1, 8], dtype: float32}
  - {name: state, shape: [2, 1, 16], dtype: float32, batch_axis: null}
outputs: [p, stateN]
state: [{input: state, output: stateN}]
datasets:
  feats: {kind: npz, path: feats.npz, arrays: {x: x}, stream: {axis: 1, hop: 8}}
"""
