"""The prune pass physically removes channels, the result exports, and it travels
between stages as data only: a state dict and a pruning plan, never a pickled module."""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import pytest

from edgebuild.errors import StageError
from edgebuild.passes.export_onnx import ExportOnnx, ExportParams
from edgebuild.passes.prune import Prune, PruneParams
from edgebuild.passes.pruned_torch import PLAN_FILE, WEIGHTS_FILE
from edgebuild.passes.torch_model import load_stage_model
from tests.integration.passes.conftest import RECIPE, as_artifact, context

pytest.importorskip("torch_pruning", reason="the prune pass needs torch-pruning")
pytestmark = pytest.mark.slow

HOOK = """
CALLS = []
def finetune(model, epochs):
    import pathlib
    pathlib.Path(__file__).with_name("called").write_text(str(epochs))
    return model
"""

RESHAPING_HOOK = """
import torch
def finetune(model):
    model.classifier = torch.nn.Linear(model.classifier.in_features, 10, bias=False)
    return model
"""

# Residual and concatenated channels: torch-pruning couples them into one group, and
# the replay must remove the same channels from every member.
RESIDUAL = """
import torch
from torch import nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(1, 16, 3, stride=2, padding=1)
        self.bn = nn.BatchNorm2d(16)
        self.a = nn.Conv2d(16, 16, 3, padding=1)
        self.b = nn.Conv2d(16, 16, 3, padding=1)
        self.side = nn.Conv2d(16, 8, 1)
        self.head = nn.Linear(24, 10)

    def forward(self, x):
        x = torch.relu(self.bn(self.stem(x)))
        x = x + self.b(torch.relu(self.a(x)))
        x = torch.cat([x, self.side(x)], 1)
        return self.head(x.mean((2, 3)))

def build():
    torch.manual_seed(0)
    return Net()
"""

def evil_pickle(marker: Path) -> bytes:
    """A pickle whose loading runs `touch marker`: what an attacker puts in a store."""

    class Payload:
        def __reduce__(self) -> tuple[Any, ...]:
            import os

            return (os.system, (f"touch {marker}",))

    return pickle.dumps(Payload())


def prune(out: Path, params: PruneParams, inputs: dict[str, Any] | None = None,
          recipe: dict[str, Any] | None = None) -> Any:
    return Prune().run(context(out, inputs, recipe), params)


def test_prune_shrinks_and_exports(tmp_path: Path) -> None:
    import onnxruntime as ort
    import torch

    (tmp_path / "hook.py").write_text(HOOK)
    result = prune(tmp_path / "p", PruneParams(
        ratio=0.5, finetune=f"{tmp_path / 'hook.py'}:finetune", finetune_kwargs={"epochs": 3}))
    meta = result.metadata
    assert meta["parameters_after"] < 0.5 * meta["parameters_before"]
    assert (tmp_path / "called").read_text() == "3"
    # Data only: a plan and a state dict that loads with weights_only=True.
    assert result.main == PLAN_FILE and result.format == "pytorch"
    assert sorted(p.name for p in (tmp_path / "p").iterdir()) == [PLAN_FILE, WEIGHTS_FILE]
    state = torch.load(tmp_path / "p" / WEIGHTS_FILE, weights_only=True)
    assert all(isinstance(v, torch.Tensor) for v in state.values())
    plan = json.loads((tmp_path / "p" / PLAN_FILE).read_text())
    assert plan["steps"] and {"module", "out_channels", "removed"} == set(plan["steps"][0])
    artifact = as_artifact(tmp_path / "p", "pytorch", PLAN_FILE)
    pruned = load_stage_model(context(tmp_path / "r", {"model": artifact}))
    assert sum(x.numel() for x in pruned.parameters()) == meta["parameters_after"]
    assert pruned(torch.zeros(2, 1, 28, 28)).shape == (2, 10)  # the classifier kept 10 classes
    exported = ExportOnnx().run(context(tmp_path / "e", {"model": artifact}), ExportParams())
    assert exported.metadata["check"]["max_abs_diff"] < 1e-4
    session = ort.InferenceSession(str(tmp_path / "e" / "model.onnx"))
    assert session.get_outputs()[0].shape[-1] == 10


def test_replay_rebuilds_coupled_channels_exactly(tmp_path: Path) -> None:
    """Residual and concat partners, pruned twice in a row: the rebuilt module computes
    what the pruned one did, bit for bit."""
    import torch

    (tmp_path / "net.py").write_text(RESIDUAL)
    recipe = {**RECIPE, "model": {"factory": f"{tmp_path / 'net.py'}:build"}}
    first = prune(tmp_path / "p1", PruneParams(ratio=0.25), recipe=recipe)
    second = prune(tmp_path / "p2", PruneParams(ratio=0.25, importance="l2"),
                   {"model": as_artifact(tmp_path / "p1", "pytorch", first.main)}, recipe)
    assert second.metadata["parameters_after"] < first.metadata["parameters_after"]
    steps = json.loads((tmp_path / "p2" / PLAN_FILE).read_text())["steps"]
    assert len(steps) > len(json.loads((tmp_path / "p1" / PLAN_FILE).read_text())["steps"])
    model = load_stage_model(context(tmp_path / "r", {
        "model": as_artifact(tmp_path / "p2", "pytorch", second.main)}, recipe))
    assert model.b.out_channels == model.stem.out_channels < 16  # one residual group
    assert sum(x.numel() for x in model.parameters()) == second.metadata["parameters_after"]
    x = torch.randn(3, 1, 28, 28, generator=torch.Generator().manual_seed(1))
    state = torch.load(tmp_path / "p2" / WEIGHTS_FILE, weights_only=True)
    assert set(state) == set(model.state_dict())
    again = load_stage_model(context(tmp_path / "r2", {
        "model": as_artifact(tmp_path / "p2", "pytorch", second.main)}, recipe))
    with torch.no_grad():
        assert torch.equal(model(x), again(x))


def test_a_finetune_that_changes_layers_fails_in_prune(tmp_path: Path) -> None:
    (tmp_path / "hook.py").write_text(RESHAPING_HOOK)
    with pytest.raises(StageError, match="do not fit the model rebuilt") as error:
        prune(tmp_path / "p", PruneParams(ratio=0.3,
                                          finetune=f"{tmp_path / 'hook.py'}:finetune"))
    assert "must train the pruned model it is given" in error.value.hint


def test_unknown_ignored_module_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(StageError, match="unknown modules"):
        prune(tmp_path / "p", PruneParams(ratio=0.3, ignore=["nope"]))


@pytest.fixture(scope="module")
def pruned(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("pruned")
    prune(folder, PruneParams(ratio=0.3))
    return folder


def tampered(pruned: Path, tmp_path: Path, files: dict[str, bytes], main: str = PLAN_FILE
             ) -> Any:
    """`pruned` with some files replaced, as the next stage's input."""
    folder = tmp_path / "entry"
    folder.mkdir()
    for file in pruned.iterdir():
        (folder / file.name).write_bytes(file.read_bytes())
    for name, data in files.items():
        (folder / name).write_bytes(data)
    return {"model": as_artifact(folder, "pytorch", main)}


@pytest.mark.parametrize("where", ["weights", "main"])
def test_a_pickled_payload_is_refused_and_never_runs(pruned: Path, tmp_path: Path,
                                                     where: str) -> None:
    """The attack of issue 28: a store entry whose file unpickles to code. Replacing the
    weights, or making the entry's main file a pickle (the old format), runs nothing."""
    marker = tmp_path / "pwned"
    if where == "weights":
        inputs = tampered(pruned, tmp_path, {WEIGHTS_FILE: evil_pickle(marker)})
        match = f"refusing the pruned weights {WEIGHTS_FILE}: not a state dict"
    else:
        inputs = tampered(pruned, tmp_path, {"model.pt": evil_pickle(marker)}, "model.pt")
        match = "refusing the pruned model 'model.pt'"
    with pytest.raises(StageError, match=match) as error:
        ExportOnnx().run(context(tmp_path / "e", inputs), ExportParams())
    assert "refused on purpose" in error.value.hint
    assert not marker.exists()
    assert not (tmp_path / "e" / "model.onnx").exists()


@pytest.mark.parametrize(("plan", "match"), [
    ({"format": "edgebuild.pruned-torch", "version": 1,
      "steps": [{"module": "__class__", "out_channels": True, "removed": [0]}]},
     "names no prunable module"),
    ({"format": "edgebuild.pruned-torch", "version": 1,
      "steps": [{"module": "features.0", "out_channels": True, "removed": [0, 99999]}]},
     "out of range, repeated or all of them"),
    ({"format": "edgebuild.pruned-torch", "version": 1,
      "steps": [{"module": "features.0", "out_channels": "yes", "removed": [0]}]},
     "steps.0.out_channels"),
    ({"format": "pickle", "version": 1, "steps": []}, "format"),
    ({"format": "edgebuild.pruned-torch", "version": 1, "steps": [], "run": "os.system"},
     "run: Extra inputs"),
])
def test_a_bad_plan_is_refused(pruned: Path, tmp_path: Path, plan: dict[str, Any],
                               match: str) -> None:
    inputs = tampered(pruned, tmp_path, {PLAN_FILE: json.dumps(plan).encode()})
    with pytest.raises(StageError, match=match):
        load_stage_model(context(tmp_path / "e", inputs))


def test_weights_of_another_shape_are_refused(pruned: Path, tmp_path: Path) -> None:
    import io

    import torch

    state = torch.load(pruned / WEIGHTS_FILE, weights_only=True)
    state["classifier.weight"] = torch.zeros(3, 3)
    buffer = io.BytesIO()
    torch.save(state, buffer)
    inputs = tampered(pruned, tmp_path, {WEIGHTS_FILE: buffer.getvalue()})
    with pytest.raises(StageError, match="do not fit the model rebuilt"):
        load_stage_model(context(tmp_path / "e", inputs))
