"""EfficientNet-Lite0 (the quickstart model) exported once per test session, and photos."""

from __future__ import annotations

import functools
import shutil
import tempfile
from pathlib import Path
from typing import Any

from edgebuild.core.artifact import Artifact
from edgebuild.data.loaders import Samples, load_dataset
from edgebuild.execute.worker import context_from_recipe
from tests.conftest import REPO

RECIPE = REPO / "recipes" / "quickstart.yaml"


@functools.cache
def recipe_data() -> dict[str, Any]:
    """The quickstart recipe as a worker sees it (normalized, plain data)."""
    from edgebuild.recipe.loader import load_recipe

    return load_recipe(RECIPE).recipe.model_dump(
        mode="json", include={"model", "inputs", "outputs", "datasets"})


@functools.cache
def _exported() -> Path:
    from edgebuild.passes.export_onnx import ExportOnnx, ExportParams
    from edgebuild.passes.onnx_optimize import OnnxOptimize, OptimizeParams

    root = Path(tempfile.mkdtemp(prefix="edgebuild-test-efficientnet-"))
    recipe = recipe_data()
    (root / "export").mkdir()
    (root / "opt").mkdir()
    ExportOnnx().run(context_from_recipe("export", {}, root / "export", recipe, RECIPE.parent),
                     ExportParams(opset=17))
    exported = Artifact("0" * 64, "onnx", root / "export", {}, {}, {"main": "model.onnx"})
    OnnxOptimize().run(context_from_recipe("opt", {"model": exported}, root / "opt", recipe,
                                    RECIPE.parent), OptimizeParams())
    return root / "opt" / "model.onnx"


def efficientnet_onnx(tmp_path: Path) -> Path:
    """A private copy of the exported, optimized EfficientNet-Lite0."""
    target = tmp_path / "efficientnet-lite0.onnx"
    shutil.copyfile(_exported(), target)
    return target


def photos(count: int) -> Samples:
    """The first `count` scikit-image photos, preprocessed as the quickstart recipe does."""
    from pydantic import TypeAdapter

    from edgebuild.recipe.datasets import DatasetSpec

    spec = TypeAdapter(DatasetSpec).validate_python({**recipe_data()["datasets"]["photos"],
                                                     "limit": count})
    return load_dataset(spec, RECIPE.parent, ["image"], "photos")
