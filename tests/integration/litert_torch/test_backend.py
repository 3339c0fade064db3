"""The litert-torch backend for real: the committed Fashion-MNIST CNN from PyTorch to
.tflite (float32, and int8 calibrated on the recipe's images) with Google's LiteRT-Torch,
gated in the same interpreter as the tflite backend's builds, and a model that does not
export named by its line. Not in CI's install (conftest.py): run here with
`EDGEBUILD_LITERT_TORCH=1 bash scripts/setup.sh` first."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import REPO, edgebuild, fashion_recipe

SIGN_GATE = REPO / "tests" / "models" / "sign_gate.py"  # data-dependent control flow

TARGETS = """\
targets:
  android-litert-torch:
    inherit_passes: false
    options: {latency_on: host}
    measure: {warmup_iterations: 1, min_iterations: 5, min_seconds: 0, max_busy_share: null}
    gates:
      accuracy: {dataset: test, min_top1_agreement: 99, min_cosine: 0.9999}
      size: {max_mb: 2}
  android-litert-torch-int8:
    profile: android-litert-torch
    inherit_passes: false
    options: {precision: int8, calibration_dataset: calibration, calibration_samples: 32,
              latency_on: host}
    measure: {warmup_iterations: 1, min_iterations: 5, min_seconds: 0, max_busy_share: null}
    gates:
      accuracy: {dataset: test, min_top1_agreement: 95, min_cosine: 0.99}
      size: {max_mb: 1}
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("litert-torch")
    recipe = folder / "fashion.yaml"
    head = fashion_recipe("fashion-litert-torch", test_limit=100, calibration_limit=32)
    recipe.write_text(head + TARGETS)
    out = folder / "out"
    done = edgebuild("run", "-q", str(recipe), "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    return out


@pytest.mark.slow
def test_float32_and_int8_pass_their_gates_in_litert(built: Path) -> None:
    report = json.loads((built / "report.json").read_text())
    gates = {(t["name"], g["gate"]): g for t in report["targets"] for g in t["gates"]}
    for target in ("android-litert-torch", "android-litert-torch-int8"):
        accuracy = gates[(target, "accuracy")]
        assert accuracy["status"] == "passed", accuracy["message"]
        assert "ai-edge-litert interpreter" in accuracy["message"]
        assert gates[(target, "size")]["status"] == "passed"
    stages = {s["id"]: s for s in report["stages"]}
    # Straight from PyTorch: no ONNX export, no onnx2tf stage in these targets' chains.
    assert not any(s.startswith(("export-onnx", "onnx-to-tf")) for s in stages)
    assert stages["compile@android-litert-torch-int8"]["metadata"]["calibration_samples"] == 32


@pytest.mark.slow
def test_the_tflite_loads_and_computes_what_pytorch_does(built: Path) -> None:
    """The float32 artifact in ai-edge-litert's interpreter, through the tflite backend's
    runner (its recorded io: the input stays NCHW), against eager PyTorch."""
    import torch

    from edgebuild.backends.tflite.runner import TfliteRunner
    from edgebuild.passes.torch_model import build_torch_model

    artifacts = built / "artifacts" / "android-litert-torch"
    manifest = json.loads((artifacts / "manifest.json").read_text())
    io = manifest["runner_metadata"]["io"]
    assert io["inputs"][0]["perm"] in (None, [0, 1, 2, 3])  # NCHW kept
    model = build_torch_model({"factory": f"{REPO}/recipes/models/fashion_mnist_cnn.py:build",
                               "weights": f"{REPO}/recipes/models/fashion_mnist_cnn.pt"}, REPO)
    x = np.random.default_rng(0).uniform(-1, 1, (1, 1, 28, 28)).astype(np.float32)
    with TfliteRunner(artifacts / "model.tflite", io, threads=1, use_xnnpack=True) as runner:
        got = runner.infer({"image": x})["logits"]
    with torch.no_grad():
        expected = model.eval()(torch.from_numpy(x)).numpy()
    scale = float(np.abs(expected).max())  # relative: XNNPACK sums in another order
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-4 * scale)


@pytest.mark.slow
def test_data_dependent_control_flow_names_the_line(tmp_path: Path) -> None:
    recipe = tmp_path / "sign.yaml"
    recipe.write_text(f"""\
name: sign-gate
model: {{factory: {SIGN_GATE}:build}}
inputs: [{{name: x, shape: [1, 8]}}]
outputs: [y]
targets:
  android-litert-torch:
    gates: {{size: {{max_mb: 1}}}}
""")
    done = edgebuild("run", str(recipe), "--out", str(tmp_path / "out"))
    said = done.stdout + done.stderr
    assert done.returncode != 0, said
    assert "LiteRT-Torch: torch.export failed at sign_gate.py:" in said
    assert "if bool(y.sum() > 0)" in said
    assert "torch.where or torch.cond" in said
