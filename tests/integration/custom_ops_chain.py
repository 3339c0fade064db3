"""Build a target of recipes/custom-op-attention.yaml stage by stage through the worker's
own entry point (`run_stage`: the spec a local or remote worker gets, its custom ops
activated from the spec), so each backend's test checks the path a real run takes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from edgebuild.core.artifact import Artifact
from edgebuild.core.digest import digest_file
from edgebuild.core.stage_result import StageResult
from edgebuild.execute.task import stage_spec
from edgebuild.execute.worker import run_stage
from edgebuild.plan.planner import Plan, build_plan
from edgebuild.recipe.loader import load_recipe
from tests.conftest import REPO

RECIPE = REPO / "recipes" / "custom-op-attention.yaml"


def plan() -> Plan:
    return build_plan(load_recipe(RECIPE))


def run(built: Plan, stage_id: str, inputs: dict[str, Artifact], root: Path,
        spec_changes: dict[str, Any] | None = None) -> StageResult:
    """One stage's result, run as a worker runs it."""
    out = root / stage_id.replace("@", "_").replace("#", "_")
    out.mkdir(parents=True, exist_ok=True)
    spec = {**stage_spec(built, built.stage(stage_id), inputs, out), **(spec_changes or {})}
    return run_stage(spec)


def artifact(result: StageResult, folder: Path) -> Artifact:
    files = {p.relative_to(folder).as_posix(): digest_file(p)
             for p in sorted(folder.rglob("*")) if p.is_file()}
    sizes = {name: (folder / name).stat().st_size for name in files}
    assert result.format is not None
    return Artifact("0" * 64, result.format, folder, files, sizes,
                    {**result.metadata, "main": result.main})


def build(built: Plan, target: str, root: Path) -> dict[str, Artifact]:
    """Every stage of `target`'s chain and its compile; stage id -> artifact."""
    stages = built.targets[target]
    done: dict[str, Artifact] = {}
    for stage_id in [*stages.chain, stages.compiled]:
        stage = built.stage(stage_id)
        result = run(built, stage_id, {r: done[s] for r, s in stage.inputs}, root)
        assert result.status == "ok", result
        out = root / stage_id.replace("@", "_").replace("#", "_")
        done[stage_id] = artifact(result, out)
    return done


def torch_outputs(images: np.ndarray) -> np.ndarray:
    """The PyTorch model, custom op included: the reference every backend must match."""
    import torch

    from edgebuild.passes.torch_model import build_torch_model

    source = load_recipe(RECIPE).recipe.model.model_dump(mode="json")
    model = build_torch_model(source, RECIPE.parent)
    with torch.no_grad():
        return np.asarray(model(torch.from_numpy(images)).numpy())


def images(count: int = 8) -> np.ndarray:
    return np.random.default_rng(0).standard_normal((count, 1, 1, 28, 28)).astype(np.float32)
