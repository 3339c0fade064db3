"""A recurrent step model and its data for the stream tests of several backends (issue 30):
one GRU step, its state an input and an output, built with onnx's helper."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tests.conftest import REPO

HIDDEN, FEATURES, STEPS = 64, 40, 50


# Silero VAD (the PyPI package silero-vad) as recipes/voice-activity.yaml declares it,
# streamed over recipes/data/speech: a test recipe is `name:`, this, then its targets.
SILERO_VAD = """\
model: {onnx: {package: silero_vad, path: data/silero_vad.onnx}}
inputs:
  - {name: input, shape: [1, 576], dtype: float32}
  - {name: state, shape: [2, 1, 128], dtype: float32, batch_axis: null}
  - {name: sr, shape: [], dtype: int64, value: 16000}
outputs: [output, stateN]
state: [{input: state, output: stateN, initial: zeros}]
datasets:
  speech:
    kind: callable
    function: {repo}/recipes/models/voice_activity.py:recording
    stream: {axis: 1, hop: 512}
""".replace("{repo}", str(REPO))

# gru_step's model, its state pair and its stream of features: the head of a recipe.
GRU_HEAD = """\
model: {onnx: gru.onnx}
inputs:
  - {name: x, shape: [1, 40], dtype: float32}
  - {name: h, shape: [1, 64], dtype: float32, batch_axis: null}
outputs: [p, hn]
state:
  - {input: h, output: hn}
datasets:
  feats: {kind: npz, path: feats.npz, arrays: {x: x}, stream: {axis: 1, hop: 40}}
"""

RECIPE = "name: gru-stream\n" + GRU_HEAD + """\
targets:
  TARGET:
    gates:
      accuracy:
        - {dataset: feats, output: p, task: regression, max_abs_error: MAX_ABS}
        - {dataset: feats, output: hn, task: regression, min_cosine: 0.99999}
"""


def gru_step(path: Path) -> None:
    """One GRU step: x [1, 40] and the state h [1, 64] in; the probability p [1, 1] and
    the next state hn [1, 64] out (the state 2-D: onnx2tf transposes a 3-D one)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    weights = {
        "W": rng.standard_normal((1, 3 * HIDDEN, FEATURES)) * 0.3,
        "R": rng.standard_normal((1, 3 * HIDDEN, HIDDEN)) * 0.3,
        "B": rng.standard_normal((1, 6 * HIDDEN)) * 0.1,
        "Wo": rng.standard_normal((HIDDEN, 1)) * 0.5,
        "zero": np.zeros(1),
    }
    axes = numpy_helper.from_array(np.array([0], np.int64), "axes")
    nodes = [
        helper.make_node("Unsqueeze", ["x", "axes"], ["x3"]),
        helper.make_node("Unsqueeze", ["h", "axes"], ["h3"]),
        helper.make_node("GRU", ["x3", "W", "R", "B", "", "h3"], ["y", "yh"],
                         hidden_size=HIDDEN, linear_before_reset=1),
        helper.make_node("Squeeze", ["yh", "axes"], ["hn"]),
        helper.make_node("MatMul", ["hn", "Wo"], ["logit"]),
        helper.make_node("Add", ["logit", "zero"], ["biased"]),
        helper.make_node("Sigmoid", ["biased"], ["p"]),
    ]
    graph = helper.make_graph(
        nodes, "gru_step",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, FEATURES]),
         helper.make_tensor_value_info("h", TensorProto.FLOAT, [1, HIDDEN])],
        [helper.make_tensor_value_info("p", TensorProto.FLOAT, [1, 1]),
         helper.make_tensor_value_info("hn", TensorProto.FLOAT, [1, HIDDEN])],
        [numpy_helper.from_array(v.astype(np.float32), k) for k, v in weights.items()]
        + [axes])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


def plain_loop(model: Path, sequence: np.ndarray, carry: bool) -> np.ndarray:
    import onnxruntime as ort

    run = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"]).run
    state, found = np.zeros((1, HIDDEN), np.float32), []
    for step in range(STEPS):
        p, following = run(None, {"x": sequence[None, step * FEATURES:(step + 1) * FEATURES],
                                  "h": state})
        found.append(p[0, 0])
        state = following if carry else state
    return np.array(found)


def write_recipe(folder: Path, target: str, max_abs_error: float) -> Path:
    """The model, two sequences of 50 steps of features, and a recipe streaming them for
    `target`, gated on the probability within `max_abs_error` of FP32 streamed."""
    gru_step(folder / "gru.onnx")
    features = np.random.default_rng(1).standard_normal((2, FEATURES * STEPS))
    np.savez(folder / "feats.npz", x=features.astype(np.float32))
    path = folder / "gru.yaml"
    path.write_text(RECIPE.replace("TARGET", target).replace("MAX_ABS", str(max_abs_error)))
    return path


def features(folder: Path) -> np.ndarray:
    with np.load(folder / "feats.npz") as archive:
        found: np.ndarray = archive["x"]
        return found
