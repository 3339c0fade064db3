"""XNNPACK refuses an int8 model: the runner names the layer and either runs TFLite's
builtin kernels, labelled so in every figure (`delegate_fallback: builtin`, the
default), or fails the stage (`fail`). The model is converted for real by the
pipeline (torch -> ONNX -> onnx2tf -> int8 TFLite) and refused for real by XNNPACK."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import REPO, edgebuild

# Skipped by conftest.py when tensorflow, ai-edge-litert or onnx2tf is missing.
pytestmark = [pytest.mark.tflite, pytest.mark.slow]


def _recipe(tmp_path: Path, fallback: str) -> Path:
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "inputs.npz", x=rng.random((16, 1, 8, 8), dtype=np.float32))
    recipe = tmp_path / f"refused-{fallback}.yaml"
    recipe.write_text(f"""\
name: refused-{fallback}
model: {{factory: {REPO / "tests" / "models" / "cancelling_conv.py"}:build}}
inputs: [{{name: x, shape: [1, 1, 8, 8]}}]
outputs: [y]
datasets:
  inputs: {{kind: npz, path: inputs.npz}}
passes: [export-onnx: {{opset: 17}}]
policy: {{unmeasurable: warn}}    # a busy machine may not time it; the label is checked
targets:
  android:
    options: {{precision: int8, calibration_dataset: inputs, latency_on: host,
               delegate_fallback: {fallback}}}
    gates:
      accuracy: {{dataset: inputs, task: regression, max_abs_error: 0.05}}
      latency: {{budget_ms: 1000}}
""")
    return recipe


def test_builtin_fallback_names_the_layer_and_labels_the_figures(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = edgebuild("run", str(_recipe(tmp_path, "builtin")), "--out", str(out),
                       "--cache-dir", str(tmp_path / "cache"))
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads((out / "report.json").read_text())
    (target,) = report["targets"]
    gates = {g["gate"]: g for g in target["gates"]}
    assert gates["accuracy"]["status"] == "passed", gates["accuracy"]
    stages = {s["id"]: s for s in report["stages"]}
    timed = stages["measure-latency@android"]["outcome"] != "unmeasurable"  # too busy here
    assert gates["latency"]["status"] == ("passed" if timed else "unmeasurable")
    for stage in ("infer@android", "measure-latency@android")[:2 if timed else 1]:
        where = stages[stage]["metadata"]["where"]
        assert "ran on builtin kernels instead: XNNPACK refused the model" in where, where
        assert "CONV_2D op #" in where and "XNNPACK needs < 256" in where, where


def test_fail_mode_stops_naming_the_layer(tmp_path: Path) -> None:
    result = edgebuild("run", str(_recipe(tmp_path, "fail")), "--out", str(tmp_path / "out"),
                       "--cache-dir", str(tmp_path / "cache"))
    assert result.returncode != 0, result.stdout
    assert "XNNPACK refused the model" in result.stderr, result.stderr
    assert "CONV_2D op #" in result.stderr and "delegate_fallback: builtin" in result.stderr
    assert "Traceback" not in result.stderr
