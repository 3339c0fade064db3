"""fold-inputs binds a declared-constant input into the graph and folds the `If` it decides;
every later stage of the chain is told the model no longer has the input (issue 30)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from edgebuild.core.artifact import Artifact
from edgebuild.data.loaders import Samples, without_folded
from edgebuild.errors import DataError, PlanError, StageError
from edgebuild.execute.worker import context_from_recipe
from edgebuild.passes.fold_inputs import FoldInputs, FoldParams, decided_by, fold_hint
from edgebuild.plan.planner import build_plan
from edgebuild.recipe.loader import load_recipe

INPUTS = [{"name": "x", "shape": [1, 4], "dtype": "float32", "dynamic_axes": {}},
          {"name": "mode", "shape": [], "dtype": "int64", "dynamic_axes": {}, "value": 1}]


def if_model(path: Path) -> Path:
    """y = Relu(x) when mode == 1, else Reshape(x, [-1]) — a branch of another rank, as
    Silero VAD's 8 kHz branch has other shapes than its 16 kHz one. x's dims are
    dynamic, as an exporter leaves them."""
    then = helper.make_graph([helper.make_node("Relu", ["x"], ["t"])], "then", [],
                             [helper.make_tensor_value_info("t", TensorProto.FLOAT, None)])
    other = helper.make_graph(
        [helper.make_node("Constant", [], ["flat"], value=helper.make_tensor(
            "flat", TensorProto.INT64, [1], [-1])),
         helper.make_node("Reshape", ["x", "flat"], ["e"])], "else", [],
        [helper.make_tensor_value_info("e", TensorProto.FLOAT, None)])
    graph = helper.make_graph(
        [helper.make_node("Constant", [], ["one"], value=helper.make_tensor(
            "one", TensorProto.INT64, [], [1])),
         helper.make_node("Equal", ["mode", "one"], ["cond"]),
         helper.make_node("If", ["cond"], ["y"], name="If_0", then_branch=then,
                          else_branch=other)],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", "c"]),
         helper.make_tensor_value_info("mode", TensorProto.INT64, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, str(path))
    return path


def folded(tmp_path: Path, **params: Any) -> tuple[Path, dict[str, Any]]:
    source = if_model(tmp_path / "if.onnx")
    artifact = Artifact(key="k", format="onnx", path=tmp_path, files={"if.onnx": "x"},
                        sizes={}, metadata={"main": "if.onnx"})
    out = tmp_path / "out"
    out.mkdir()
    ctx = context_from_recipe("fold-inputs", {"model": artifact}, out,
                              {"inputs": INPUTS, "outputs": ["y"]}, tmp_path)
    result = FoldInputs().run(ctx, FoldParams(inputs=["mode"], **params))
    assert source.is_file()
    return out / result.main, result.metadata


def test_the_if_on_a_bound_input_is_folded_away(tmp_path: Path) -> None:
    import onnxruntime as ort

    path, metadata = folded(tmp_path)
    model = onnx.load(str(path))
    assert [i.name for i in model.graph.input] == ["x"]
    assert not [n for n in model.graph.node if n.op_type in ("If", "Loop")]
    assert metadata["bound"] == {"mode": 1}
    assert metadata["decided_by_bound"] == {"If_0": ["mode"]}
    assert metadata["pinned"] == {"x": [1, 4]}
    assert metadata["check"]["samples"] == 4
    x = np.array([[-1.0, 2.0, -3.0, 4.0]], np.float32)
    (y,) = ort.InferenceSession(str(path)).run(None, {"x": x})
    np.testing.assert_array_equal(y, np.maximum(x, 0))


def test_an_unknown_input_in_the_file_is_a_stage_error(tmp_path: Path) -> None:
    with pytest.raises(StageError, match="has no input 'rate'"):
        source = if_model(tmp_path / "if.onnx")
        artifact = Artifact(key="k", format="onnx", path=tmp_path, files={source.name: "x"},
                            sizes={}, metadata={"main": source.name})
        ctx = context_from_recipe("fold-inputs", {"model": artifact}, tmp_path,
                                  {"inputs": INPUTS, "outputs": ["y"]}, tmp_path)
        FoldInputs().run(ctx, FoldParams(inputs=["rate"]))


def test_the_hint_names_the_pass_only_for_declared_constants(tmp_path: Path) -> None:
    model = onnx.load(str(if_model(tmp_path / "if.onnx")))
    assert decided_by(model.graph) == {"If_0": {"mode"}}
    hint = fold_hint(model, INPUTS)
    assert "'If_0'" in hint and "mode = 1" in hint
    assert "`passes: [fold-inputs: {inputs: [mode]}]`" in hint
    no_value = [INPUTS[0], {k: v for k, v in INPUTS[1].items() if k != "value"}]
    assert fold_hint(model, no_value) == ""


RECIPE = """\
name: folded
model: {factory: "m.py:build"}
inputs:
  - {name: x, shape: [1, 4]}
  - {name: mode, shape: [], dtype: int64, value: 1}
datasets:
  d: {kind: npz, path: d.npz}
targets:
  host-cpu:
    gates: {latency: {budget_ms: 5}, accuracy: {dataset: d, min_cosine: 0.99}}
  intel-cpu:
    passes: [fold-inputs: {inputs: [%s]}]
    gates: {latency: {budget_ms: 5}, accuracy: {dataset: d, min_cosine: 0.99}}
"""


def plan_of(tmp_path: Path, bound: str = "mode", text: str = RECIPE):  # type: ignore[no-untyped-def]
    (tmp_path / "m.py").write_text("def build(): ...\n")
    path = tmp_path / "r.yaml"
    path.write_text(text % bound)
    return build_plan(load_recipe(path))


def test_stages_after_the_fold_are_told_the_input_is_gone(tmp_path: Path) -> None:
    plan = plan_of(tmp_path)
    recipe = plan.recipe.recipe
    stages = plan.targets["intel-cpu"]
    after = [stages.compiled, stages.latency, *stages.infers.values()]
    for sid in after:
        io = plan.stage(sid).io_declarations(recipe)
        assert [t["name"] for t in io["inputs"]] == ["x"], sid
        assert [(t["name"], t["value"]) for t in io["folded"]] == [("mode", 1)]
    # The fold itself, the FP32 reference and the other target still feed it.
    untouched = [*stages.chain, *stages.references.values(),
                 plan.targets["host-cpu"].compiled, plan.targets["host-cpu"].latency]
    for sid in untouched:
        io = plan.stage(sid).io_declarations(recipe)
        assert [t["name"] for t in io["inputs"]] == ["x", "mode"], sid
        assert "folded" not in io


def test_binding_an_input_without_a_value_is_a_plan_error(tmp_path: Path) -> None:
    with pytest.raises(PlanError, match="declares no `value:`"):
        plan_of(tmp_path, "x")
    with pytest.raises(PlanError, match="does not declare") as info:
        plan_of(tmp_path, "mod")
    assert "did you mean 'mode'?" in info.value.hint


def test_a_dataset_giving_a_folded_input_must_give_the_value_bound() -> None:
    samples = Samples({"x": np.zeros((3, 4), np.float32), "mode": np.ones(3, np.int64)},
                      None, ["a", "b", "c"])
    assert set(without_folded(samples, {"mode": 1}, "d").inputs) == {"x"}
    samples.inputs["mode"][1] = 2
    with pytest.raises(DataError, match=re.escape("value(s) 1, 2, but `fold-inputs` bound it")):
        without_folded(samples, {"mode": 1}, "d")
