"""A real exported model as Ultralytics' exporter leaves it, for each backend's test that it
builds from such a file (issue 29, "Robust on real exports").

The committed Fashion-MNIST CNN (trained weights) exported by torch.onnx with a dynamic
batch, then given `metadata_props` the way Ultralytics writes them (`str()` of each Python
value: `names` a dict literal, `imgsz` a list, `args` a dict) and a doc_string holding
markup. onnxruntime's QNN preprocessing used to crash on any such file.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

from tests.conftest import FASHION, REPO, edgebuild

CLASSES = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt",
           "Sneaker", "Bag", "Ankle boot"]
ULTRALYTICS: dict[str, Any] = {
    "description": "Ultralytics YOLOv8n-cls model trained on fashion-mnist.yaml",
    "author": "Ultralytics", "date": "2026-11-24T10:00:00", "version": "8.3.0",
    "license": "AGPL-3.0 License (https://ultralytics.com/license)",
    "docs": "https://docs.ultralytics.com", "stride": 1, "task": "classify", "batch": 1,
    "imgsz": [28, 28], "names": dict(enumerate(CLASSES)),
    "args": {"batch": 1, "half": False, "int8": False, "dynamic": True, "nms": False},
    "channels": 1}
EXPECTED = {"task": "classify", "names": CLASSES, "stride": 1, "imgsz": [28, 28],
            "ignored": []}
SUMMARY = ("task classify, 10 classes (T-shirt/top, Trouser, Pullover, Dress, …), stride 1, "
           "input 28×28")


def export(path: Path) -> Path:
    """The CNN as `yolo export format=onnx dynamic=True` would leave it."""
    import importlib.util

    import onnx
    import torch

    spec = importlib.util.spec_from_file_location(
        "fashion_mnist_cnn", REPO / "recipes/models/fashion_mnist_cnn.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model = module.build()
    model.load_state_dict(torch.load(REPO / "recipes/models/fashion_mnist_cnn.pt",
                                     weights_only=True))
    torch.onnx.export(model, (torch.zeros(1, 1, 28, 28),), str(path), input_names=["images"],
                      output_names=["output0"], opset_version=17, dynamo=False,
                      dynamic_axes={"images": {0: "batch"}, "output0": {0: "batch"}})
    exported = onnx.load(str(path))
    for key, value in ULTRALYTICS.items():  # ultralytics/engine/exporter.py: str(v)
        entry = exported.metadata_props.add()
        entry.key, entry.value = key, str(value)
    exported.doc_string = "exported by <b>torch</b> | [docs](javascript:alert(1))\n# heading"
    onnx.save(exported, str(path))
    return path


def project(folder: Path, targets: str) -> Path:
    """A recipe around the exported file; `targets` is the YAML of its `targets:` block."""
    folder.mkdir(parents=True, exist_ok=True)
    export(folder / "model.onnx")
    recipe = folder / "recipe.yaml"
    recipe.write_text(textwrap.dedent(f"""\
        name: ultralytics-style
        model: {{onnx: model.onnx}}
        inputs: [{{name: images, shape: [1, 1, 28, 28], dtype: float32}}]
        outputs: [output0]
        datasets:
          test:
            kind: idx
            images: {FASHION}/t10k-images-idx3-ubyte.gz
            labels: {FASHION}/t10k-labels-idx1-ubyte.gz
            limit: 100
            preprocess: &normalize {{scale: 0.00392156862745098, mean: [0.2860], std: [0.3530]}}
          calibration:
            kind: idx
            images: {FASHION}/train-images-idx3-ubyte.gz
            limit: 50
            preprocess: *normalize
        passes: [onnx-optimize]
        policy: {{unmeasurable: warn}}
        targets:
        """) + textwrap.indent(textwrap.dedent(targets), "  "))
    return recipe


def build_and_check(recipe: Path, out: Path) -> dict[str, Any]:
    """Run the recipe; every target built, gates passed, the model's metadata in the
    report under each target and once in summary.md; returns report.json."""
    result = edgebuild("run", str(recipe), "--out", str(out))
    assert result.returncode == 0, result.stdout + result.stderr
    report: dict[str, Any] = json.loads((out / "report.json").read_text())
    for target in report["targets"]:
        assert target["artifact"], target["name"]
        assert target["model"] == EXPECTED, target["name"]
        assert all(g["status"] == "passed" for g in target["gates"]), target["gates"]
    names = ", ".join(t["name"] for t in report["targets"])
    assert f"Model metadata from the ONNX file ({names}): {SUMMARY}" in (
        out / "summary.md").read_text()
    return report


def kept_metadata(model: Path) -> dict[str, str]:
    """The metadata_props of a built ONNX artifact."""
    import onnx

    return {p.key: p.value for p in onnx.load(str(model), load_external_data=False)
            .metadata_props}
