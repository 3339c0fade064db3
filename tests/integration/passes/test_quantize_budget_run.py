"""A fidelity budget through `edgebuild run`, as a recipe declares it: planned (every budget
failed to plan until its gate was dumped as written), searched on a real trained CNN, and
what was tried recorded in report.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from edgebuild import api
from tests.conftest import REPO

pytestmark = [pytest.mark.onnxruntime, pytest.mark.slow]
IDX = Path("/usr/share/datasets/fashion-mnist")

RECIPE = f"""\
name: budgeted
model:
  factory: {REPO}/recipes/models/fashion_mnist_cnn.py:build
  weights: {REPO}/recipes/models/fashion_mnist_cnn.pt
inputs: [{{name: image, shape: [1, 1, 28, 28], dtype: float32}}]
outputs: [logits]
datasets:
  test: &set
    kind: idx
    images: {IDX}/t10k-images-idx3-ubyte.gz
    labels: {IDX}/t10k-labels-idx1-ubyte.gz
    limit: 64
    preprocess: {{scale: 0.00392156862745098, mean: [0.2860], std: [0.3530]}}
  calibration: {{<<: *set, images: {IDX}/train-images-idx3-ubyte.gz, labels: null, limit: 32}}
passes: [export-onnx: {{opset: 17}}]
targets:
  host-cpu-int8:
    profile: host-cpu
    passes:
      - quantize:
          mode: static
          calibration: calibration
          per_channel: false
          budget:
            gate: &gate {{dataset: test, min_cosine: 0.99996}}
            steps: [percentile, keep_float]
            max_iterations: 8
    gates: {{accuracy: *gate}}
"""


@pytest.mark.skipif(not IDX.is_dir(), reason="needs Debian's dataset-fashion-mnist")
def test_a_budget_runs_from_a_recipe_and_says_what_it_tried(tmp_path: Path) -> None:
    recipe = tmp_path / "budget.yaml"
    recipe.write_text(RECIPE)
    report = api.run(recipe, api.RunOptions(out=tmp_path / "out"))
    stages = {s["id"]: s for s in json.loads((tmp_path / "out" / "report.json")
                                             .read_text())["stages"]}
    quantize = next(s for sid, s in stages.items() if sid.startswith("quantize"))
    budget = quantize["metadata"].get("budget")
    assert budget, quantize
    tried = [t["step"] for t in budget["trials"]]
    assert tried[0] == "as written" and budget["chosen"] in tried, budget
    assert budget["samples"] == 64 and budget["dataset"] == "test"
    # The gate the search judged by is the target's: the run's verdict agrees with it.
    gate = next(g for g in report.gates if g.gate == "accuracy")
    assert gate.status.value == "passed", gate
    assert gate.measured["cosine"] >= 0.99996
