"""A real exported Fashion-MNIST CNN and real Fashion-MNIST samples, shared by pass tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from edgebuild.core.artifact import Artifact
from edgebuild.core.op import StageContext
from edgebuild.execute.worker import context_from_recipe
from tests.conftest import REPO

DATA = Path("/usr/share/datasets/fashion-mnist")
NORMALIZE = {"scale": 1 / 255, "mean": [0.2860], "std": [0.3530]}

RECIPE: dict[str, Any] = {
    "model": {"factory": "models/fashion_mnist_cnn.py:build",
              "weights": "models/fashion_mnist_cnn.pt"},
    "inputs": [{"name": "image", "shape": [1, 1, 28, 28], "dtype": "float32",
                "dynamic_axes": {"0": "batch"}}],
    "outputs": ["logits"],
    "datasets": {
        "calib": {"kind": "idx", "images": str(DATA / "train-images-idx3-ubyte.gz"),
                  "limit": 200, "preprocess": NORMALIZE},
        "test": {"kind": "idx", "images": str(DATA / "t10k-images-idx3-ubyte.gz"),
                 "labels": str(DATA / "t10k-labels-idx1-ubyte.gz"), "limit": 1000,
                 "preprocess": NORMALIZE},
    },
}


def context(out: Path, inputs: dict[str, Artifact] | None = None,
            recipe: dict[str, Any] | None = None) -> StageContext:
    out.mkdir(parents=True, exist_ok=True)
    return context_from_recipe("test", inputs or {}, out, recipe or RECIPE, REPO / "recipes")


def as_artifact(folder: Path, fmt: str, main: str) -> Artifact:
    return Artifact("0" * 64, fmt, folder, {}, {}, {"main": main})


@pytest.fixture(scope="session")
def fashion_onnx(tmp_path_factory: pytest.TempPathFactory) -> Artifact:
    """The Fashion-MNIST CNN exported and optimized by the real passes."""
    pytest.importorskip("torch", reason="export needs torch")
    if not DATA.is_dir():
        pytest.skip("needs the Debian package dataset-fashion-mnist (scripts/setup.sh)")
    from edgebuild.passes.export_onnx import ExportOnnx, ExportParams
    from edgebuild.passes.onnx_optimize import OnnxOptimize, OptimizeParams

    root = tmp_path_factory.mktemp("fashion")
    ExportOnnx().run(context(root / "export"), ExportParams())
    exported = as_artifact(root / "export", "onnx", "model.onnx")
    OnnxOptimize().run(context(root / "opt", {"model": exported}), OptimizeParams())
    return as_artifact(root / "opt", "onnx", "model.onnx")


def top1(model: Path, ctx: StageContext) -> float:
    import onnxruntime as ort

    samples = ctx.dataset("test")
    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    x = samples.inputs["image"]
    predictions = session.run(None, {"image": x})[0].argmax(axis=1)
    return 100.0 * float(np.mean(predictions == samples.labels))
