"""Typed stage inputs on a real run: every dataset a stage reads is in its key.

The regression this guards: `quantize`'s `accuracy_aware.dataset` sat one level
down in its params, was neither validated nor keyed, and a changed evaluation set
reused a stale quantized model.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from edgebuild import api
from edgebuild.errors import RecipeError
from edgebuild.recipe.loader import load_recipe

pytest.importorskip("onnxruntime", reason="the quantize pass needs onnxruntime")
pytestmark = pytest.mark.onnxruntime

RECIPE = """\
name: nested-dataset
model: {onnx: tiny.onnx}
inputs: [{name: x, shape: [1, 4]}]
outputs: [y]
datasets:
  samples: {kind: npz, path: samples.npz, labels: y}
  evaluation: {kind: npz, path: evaluation.npz}
passes:
  - quantize:
      mode: dynamic
      accuracy_aware: {dataset: EVALUATION, max_drop: 100, max_iterations: 1}
targets:
  host-cpu:
    gates: {accuracy: {dataset: samples, min_cosine: 0.5}}
"""


def write_evaluation(folder: Path, seed: int) -> None:
    x = np.random.default_rng(seed).standard_normal((8, 4)).astype(np.float32)
    np.savez(folder / "evaluation.npz", x=x)


def test_nested_dataset_name_is_checked_at_its_line(tiny_project: Callable[..., Path]) -> None:
    recipe = tiny_project(RECIPE.replace("EVALUATION", "evaluaton"))
    with pytest.raises(RecipeError) as caught:
        load_recipe(recipe)
    (problem,) = caught.value.problems
    assert problem.location.line == 11  # the accuracy_aware line
    assert problem.key.endswith("quantize.accuracy_aware.dataset")
    assert "no dataset named 'evaluaton'" in problem.message
    assert "did you mean 'evaluation'?" in problem.hint


@pytest.mark.slow
def test_changed_nested_dataset_reruns_the_stage(tiny_project: Callable[..., Path],
                                                 tmp_path: Path) -> None:
    recipe = tiny_project(RECIPE.replace("EVALUATION", "evaluation"))
    write_evaluation(recipe.parent, seed=1)
    options = api.RunOptions(out=tmp_path / "out")

    def quantize_outcome() -> str:
        report = api.run(recipe, options)
        assert report.exit_code == 0, report.model_dump_json(indent=1)
        (stage,) = [s for s in report.stages if s.op == "quantize"]
        return stage.outcome

    assert quantize_outcome() == "built"
    assert quantize_outcome() == "cached"
    write_evaluation(recipe.parent, seed=2)  # same shape, other content
    assert quantize_outcome() == "built"


def test_the_plan_declares_nested_datasets(tiny_project: Callable[..., Path]) -> None:
    from edgebuild.plan.planner import build_plan

    recipe = tiny_project(RECIPE.replace("EVALUATION", "evaluation"))
    plan = build_plan(load_recipe(recipe))
    (stage,) = [s for s in plan.order() if s.op == "quantize"]
    assert stage.datasets == ("evaluation",)


def test_recipe_text_is_what_the_test_says() -> None:
    # The line number asserted above is the `accuracy_aware` line of RECIPE.
    assert textwrap.dedent(RECIPE).splitlines()[10].lstrip().startswith("accuracy_aware")
