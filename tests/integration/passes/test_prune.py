"""The prune pass physically removes channels, and the result exports."""

from __future__ import annotations

from pathlib import Path

import pytest

from edgebuild.errors import StageError
from edgebuild.passes.export_onnx import ExportOnnx, ExportParams
from edgebuild.passes.prune import Prune, PruneParams
from tests.integration.passes.conftest import as_artifact, context

pytest.importorskip("torch_pruning", reason="the prune pass needs torch-pruning")
pytestmark = pytest.mark.slow

HOOK = """
CALLS = []
def finetune(model, epochs):
    import pathlib
    pathlib.Path(__file__).with_name("called").write_text(str(epochs))
    return model
"""


def test_prune_shrinks_and_exports(tmp_path: Path) -> None:
    import onnxruntime as ort
    import torch

    (tmp_path / "hook.py").write_text(HOOK)
    result = Prune().run(context(tmp_path / "p"), PruneParams(
        ratio=0.5, finetune=f"{tmp_path / 'hook.py'}:finetune", finetune_kwargs={"epochs": 3}))
    meta = result.metadata
    assert meta["parameters_after"] < 0.5 * meta["parameters_before"]
    assert (tmp_path / "called").read_text() == "3"
    pruned = torch.load(tmp_path / "p" / "model.pt", weights_only=False)
    assert pruned(torch.zeros(2, 1, 28, 28)).shape == (2, 10)  # the classifier kept 10 classes
    exported = ExportOnnx().run(
        context(tmp_path / "e", {"model": as_artifact(tmp_path / "p", "pytorch", "model.pt")}),
        ExportParams())
    assert exported.metadata["check"]["max_abs_diff"] < 1e-4
    session = ort.InferenceSession(str(tmp_path / "e" / "model.onnx"))
    assert session.get_outputs()[0].shape[-1] == 10


def test_unknown_ignored_module_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(StageError, match="unknown modules"):
        Prune().run(context(tmp_path / "p"), PruneParams(ratio=0.3, ignore=["nope"]))
