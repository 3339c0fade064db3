"""decompose-lstm: a one-step LSTM written out computes what ONNX Runtime's LSTM computes
(state in, state out), and an LSTM it does not cover is refused by name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from edgebuild.errors import StageError
from edgebuild.passes.decompose_lstm import decompose

HIDDEN, INPUT = 8, 5


def lstm_model(steps: int = 1, state: bool = True, **attrs: object) -> onnx.ModelProto:
    """x [steps, 1, INPUT], h/c [1, 1, HIDDEN] -> Y, Y_h, Y_c of a seeded LSTM."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((1, 4 * HIDDEN, INPUT)).astype(np.float32)
    r = rng.standard_normal((1, 4 * HIDDEN, HIDDEN)).astype(np.float32)
    b = rng.standard_normal((1, 8 * HIDDEN)).astype(np.float32)
    inputs = ["x", "W", "R", "B", "", "h" if state else "", "c" if state else ""]
    graph = helper.make_graph(
        [helper.make_node("LSTM", inputs, ["y", "y_h", "y_c"], name="rnn/LSTM",
                          hidden_size=HIDDEN, **attrs)],
        "lstm",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [steps, 1, INPUT]),
         *([helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 1, HIDDEN])
            for n in ("h", "c")] if state else [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [steps, 1, 1, HIDDEN]),
         *(helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 1, HIDDEN])
           for n in ("y_h", "y_c"))],
        [numpy_helper.from_array(w, "W"), numpy_helper.from_array(r, "R"),
         numpy_helper.from_array(b, "B")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    import onnxruntime as ort

    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    return [np.asarray(o) for o in session.run(None, feeds)]


@pytest.mark.parametrize("state", [True, False])
def test_the_cell_computes_what_the_lstm_computes(state: bool) -> None:
    pytest.importorskip("onnxruntime")
    original = lstm_model(state=state)
    rewritten = lstm_model(state=state)
    assert decompose(rewritten) == ["rnn/LSTM"]
    onnx.checker.check_model(rewritten)
    assert "LSTM" not in {n.op_type for n in rewritten.graph.node}
    rng = np.random.default_rng(1)
    for _ in range(3):  # a stream: each step's state is the next step's
        feeds = {"x": rng.standard_normal((1, 1, INPUT)).astype(np.float32)}
        if state:
            feeds |= {"h": rng.standard_normal((1, 1, HIDDEN)).astype(np.float32),
                      "c": rng.standard_normal((1, 1, HIDDEN)).astype(np.float32)}
        expected, got = run(original, feeds), run(rewritten, feeds)
        for ref, out in zip(expected, got, strict=True):
            assert out.shape == ref.shape
            np.testing.assert_allclose(out, ref, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(("model", "why"), [
    (lstm_model(steps=3), "a sequence of length 3"),
    (lstm_model(direction="bidirectional"), "direction"),
    (lstm_model(clip=5.0), "clip"),
])
def test_what_it_does_not_cover_is_refused_by_name(model: onnx.ModelProto, why: str) -> None:
    with pytest.raises(StageError, match=f"LSTM 'rnn/LSTM' cannot be decomposed: .*{why}"):
        decompose(model)


def decompose_declared(tmp_path: Path, steps: int) -> Any:
    """The pass on an LSTM whose sequence length is dynamic in the file (`T`), the recipe
    declaring x `[steps, 1, INPUT]`."""
    from edgebuild.core.artifact import Artifact
    from edgebuild.execute.worker import context_from_recipe
    from edgebuild.passes.decompose_lstm import DecomposeLstm, DecomposeParams

    onnx.save(lstm_model(steps="T"), str(tmp_path / "seq.onnx"))  # type: ignore[arg-type]
    source = Artifact("k", "onnx", tmp_path, {"seq.onnx": ""}, {}, {"main": "seq.onnx"})
    inputs = [{"name": "x", "shape": [steps, 1, INPUT], "dtype": "float32",
               "dynamic_axes": {}},
              *({"name": n, "shape": [1, 1, HIDDEN], "dtype": "float32", "dynamic_axes": {},
                 "batch_axis": None} for n in ("h", "c"))]
    out = tmp_path / "out"
    out.mkdir()
    ctx = context_from_recipe("decompose-lstm", {"model": source}, out,
                              {"inputs": inputs, "outputs": ["y", "y_h", "y_c"]}, tmp_path)
    return out, DecomposeLstm().run(ctx, DecomposeParams())


def test_a_dynamic_sequence_length_is_pinned_from_the_declared_shape(tmp_path: Path) -> None:
    """Issue 40: a sequence export (Silero VAD's `[sequence_length, 576]`) streamed one
    step at a time is decomposed: its inputs pinned at the declared one step first."""
    pytest.importorskip("onnxruntime")
    out, result = decompose_declared(tmp_path, steps=1)
    assert result.metadata["decomposed"] == ["rnn/LSTM"]
    assert result.metadata["pinned"]["x"] == [1, 1, INPUT]
    assert result.metadata["check"]["samples"] == 4  # ONNX Runtime: the same outputs
    model = onnx.load(str(out / result.main))
    assert "LSTM" not in {n.op_type for n in model.graph.node}


def test_a_declared_sequence_longer_than_one_step_is_refused_saying_so(
        tmp_path: Path) -> None:
    with pytest.raises(StageError, match=r"a sequence of length 4 \(not 1\) in X, with "
                       r"the inputs at their declared shapes"):
        decompose_declared(tmp_path, steps=4)
