"""A stream on TFLite (issue 30): a recurrent step model (an ONNX GRU step, its state an
input and an output) converted by onnx2tf and evaluated step by step in the LiteRT
interpreter, carrying the state the .tflite itself returns; gated against FP32 streamed
the same way, and against a plain onnxruntime loop written here."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import edgebuild

pytestmark = [pytest.mark.tflite, pytest.mark.slow]

HIDDEN, FEATURES, STEPS = 64, 40, 50

RECIPE = """\
name: gru-stream
model: {onnx: gru.onnx}
inputs:
  - {name: x, shape: [1, 40], dtype: float32}
  - {name: h, shape: [1, 64], dtype: float32, batch_axis: null}
outputs: [p, hn]
state:
  - {input: h, output: hn}
datasets:
  feats: {kind: npz, path: feats.npz, arrays: {x: x}, stream: {axis: 1, hop: 40}}
targets:
  android:
    gates:
      accuracy:
        - {dataset: feats, output: p, task: regression, max_abs_error: 0.0001}
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


def test_tflite_streams_carrying_the_state_it_returns(tmp_path: Path) -> None:
    gru_step(tmp_path / "gru.onnx")
    features = np.random.default_rng(1).standard_normal((2, FEATURES * STEPS))
    np.savez(tmp_path / "feats.npz", x=features.astype(np.float32))
    (tmp_path / "gru.yaml").write_text(RECIPE)
    out = tmp_path / "out"
    run = edgebuild("run", str(tmp_path / "gru.yaml"), "--out", str(out),
                    "--cache-dir", str(tmp_path / "cache"))
    assert run.returncode == 0, run.stdout + run.stderr
    report = json.loads((out / "report.json").read_text())
    gates = {g["gate"]: g for g in report["targets"][0]["gates"]}
    assert "100 steps (2 sequences, each build carrying its own state)" in \
        gates["accuracy[p]"]["message"]
    assert "ai-edge-litert interpreter" in gates["accuracy[p]"]["message"]
    # FP32 streamed by edgebuild is the plain loop's, and the state matters to it: so a
    # TFLite build within 1e-4 of it carried its own state through all 50 steps.
    reference = next(s for s in report["stages"] if s["id"] == "reference")
    from edgebuild.cache.store import Store

    stored = Store(tmp_path / "cache").lookup(reference["key"])
    assert stored is not None
    with np.load(stored.main) as archive:
        fp32 = archive["output:p"][:, 0]
    streamed = np.concatenate([plain_loop(tmp_path / "gru.onnx", f.astype(np.float32), True)
                               for f in features])
    each_from_zero = np.concatenate([plain_loop(tmp_path / "gru.onnx",
                                                f.astype(np.float32), False)
                                     for f in features])
    np.testing.assert_allclose(fp32, streamed, atol=1e-5)
    assert np.abs(streamed - each_from_zero).max() > 0.05
    assert gates["accuracy[p]"]["measured"]["max_abs_error"] <= 1e-4
