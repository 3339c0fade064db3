"""A function a pass calls (prune's `finetune`) is part of what the stage builds from: its
file is in the stage's key, and it travels to a remote worker like the model factory."""

from __future__ import annotations

from pathlib import Path

import pytest

from edgebuild.cache.store import Store
from edgebuild.errors import DataError
from edgebuild.execute.remote.carry import carry
from edgebuild.execute.task import stage_spec
from edgebuild.plan.planner import build_plan
from edgebuild.plan.resolve import KeyResolver
from edgebuild.recipe.loader import load_recipe

RECIPE = """\
name: tuned
model: {factory: net.py:build}
inputs: [{name: x, shape: [1, 4]}]
passes: [prune: {ratio: 0.5, finetune: "tune.py:fit", finetune_kwargs: {epochs: 1}},
         export-onnx]
targets:
  host-cpu: {}
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "net.py").write_text("def build():\n    return None\n")
    (tmp_path / "tune.py").write_text("def fit(model, epochs):\n    return model\n")
    (tmp_path / "r.yaml").write_text(RECIPE)
    return tmp_path


def test_editing_the_finetune_function_rebuilds_the_prune_stage(project: Path) -> None:
    plan = build_plan(load_recipe(project / "r.yaml"))
    prune = plan.stage("prune")
    store = Store(project / "cache")
    before = KeyResolver(plan, store).key(prune, {})
    assert KeyResolver(plan, store).key(prune, {}) == before
    (project / "tune.py").write_text("def fit(model, epochs):\n    return model  # 2 epochs\n")
    assert KeyResolver(plan, store).key(prune, {}) != before
    (project / "tune.py").unlink()
    with pytest.raises(DataError, match=r"prune\.finetune 'tune\.py:fit': file .*tune\.py "
                                        r"not found"):
        KeyResolver(plan, store).key(prune, {})


def test_the_finetune_file_travels_with_the_stage(project: Path) -> None:
    plan = build_plan(load_recipe(project / "r.yaml"))
    carried = carry(stage_spec(plan, plan.stage("prune"), {}, project / "out"))
    assert carried.spec["params"]["finetune"] == "carried/hooks/tune.py:fit"
    assert carried.spec["params"]["ratio"] == 0.5
    assert carried.files["carried/hooks/tune.py"][1] == (project / "tune.py").resolve()
    # Stages that call nothing carry their params as they are.
    export = carry(stage_spec(plan, plan.stage("export-onnx"), {}, project / "out"))
    assert export.spec["params"] == plan.stage("export-onnx").params
    assert set(export.files) == {"carried/model/net.py"}  # the factory, no hooks
