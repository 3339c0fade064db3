"""Shape profiles through the real CLI: a net exported from PyTorch with dynamic H/W,
timed at two profiles on ONNX Runtime, OpenVINO (static IR reshaped at measure time,
and dynamic IR) and TFLite (pinned at the example shape, resized by the runner), with
accuracy gated on two datasets of different image sizes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import edgebuild

pytest.importorskip("onnxruntime", reason="the ONNX Runtime backend needs onnxruntime")
pytest.importorskip("openvino", reason="the OpenVINO backend needs openvino")
pytest.importorskip("torch", reason="the model is exported from PyTorch")

HERE = Path(__file__).parent

RECIPE = f"""\
name: shapes
model: {{factory: {HERE}/heat_net.py:build}}
inputs: [{{name: image, shape: [1, 3, 32, 48], dynamic_axes: {{2: height, 3: width}}}}]
outputs: [heat]
shapes:
  small: {{height: 16, width: 24}}
  large: {{height: 64, width: 96}}
datasets:
  small: {{kind: npz, path: small.npz, arrays: {{image: image}}}}
  large: {{kind: npz, path: large.npz, arrays: {{image: image}}}}
targets:
  host-cpu:
    measure: {{min_seconds: 0.2, min_iterations: 20, max_busy_share: null}}
    gates:
      accuracy:
        - {{dataset: small, task: dense, max_abs_error: 0.0001}}
        - {{dataset: large, task: dense, max_abs_error: 0.0001}}
      latency: {{budget_ms: {{small: 500, large: 1000}}}}
  ov-static:
    profile: intel-cpu
    options: {{shapes: static}}
    measure: {{min_seconds: 0.2, min_iterations: 20, max_busy_share: null}}
    gates:
      accuracy: {{dataset: small, task: dense, max_abs_error: 0.001}}
      latency: {{budget_ms: 1000}}
  ov-dynamic:
    profile: intel-cpu
    options: {{shapes: dynamic}}
    measure: {{min_seconds: 0.2, min_iterations: 20, max_busy_share: null}}
    gates:
      accuracy: {{dataset: large, task: dense, max_abs_error: 0.001}}
      latency: {{budget_ms: 1000}}
"""

TFLITE = """\
  android:
    options: {latency_on: host}
    measure: {min_seconds: 0.2, min_iterations: 20, max_busy_share: null}
    gates:
      latency: {budget_ms: 1000}
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "small.npz", image=rng.random((4, 3, 16, 24), dtype=np.float32))
    np.savez(tmp_path / "large.npz", image=rng.random((4, 3, 64, 96), dtype=np.float32))
    return tmp_path


def _run(project: Path, recipe: str, *targets: str) -> dict[str, dict[str, dict]]:
    (project / "shapes.yaml").write_text(recipe)
    args = [a for t in targets for a in ("--target", t)]
    result = edgebuild("run", str(project / "shapes.yaml"), "--out", str(project / "build"),
                       "--cache", str(project / "cache"), *args)
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads((project / "build" / "report.json").read_text())
    found: dict[str, dict[str, dict]] = {}
    for target in report["targets"]:
        for gate in target["gates"]:
            found.setdefault(gate["target"], {})[gate["gate"]] = gate
    return found


@pytest.mark.onnxruntime
@pytest.mark.openvino
def test_two_profiles_on_onnxruntime_and_openvino(project: Path) -> None:
    gates = _run(project, RECIPE, "host-cpu", "ov-static", "ov-dynamic")
    for target in ("host-cpu", "ov-static", "ov-dynamic"):
        small, large = gates[target]["latency[small]"], gates[target]["latency[large]"]
        assert small["status"] == large["status"] == "passed", (small, large)
        assert small["details"]["shapes"] == {"image": [1, 3, 16, 24]}
        assert large["details"]["shapes"] == {"image": [1, 3, 64, 96]}
        # 16x more pixels: the large profile really ran at its size.
        assert large["measured"]["p50"] > 2 * small["measured"]["p50"], (target, small, large)
        print(target, small["measured"]["p50"], large["measured"]["p50"])
    assert gates["host-cpu"]["latency[small]"]["limits"]["budget_ms"] == 500
    assert gates["host-cpu"]["latency[large]"]["limits"]["budget_ms"] == 1000
    # Two datasets of different sizes: one reference + infer each, each gated.
    accuracy = gates["host-cpu"]
    assert accuracy["accuracy[small]"]["status"] == accuracy["accuracy[large]"]["status"] \
        == "passed"
    assert accuracy["accuracy[small]"]["measured"]["samples"] == 4
    assert accuracy["accuracy[large]"]["measured"]["max_abs_error"] < 1e-4
    summary = (project / "build" / "summary.md").read_text()
    assert "latency[small]" in summary and "latency[large]" in summary
    html = (project / "build" / "report.html").read_text()
    assert "profile small" in html and "profile large" in html


@pytest.mark.tflite
def test_tflite_resizes_the_pinned_model(project: Path) -> None:
    pytest.importorskip("ai_edge_litert", reason="the TFLite backend needs ai-edge-litert")
    gates = _run(project, RECIPE + TFLITE, "android")["android"]
    small, large = gates["latency[small]"], gates["latency[large]"]
    assert small["status"] == large["status"] == "passed", (small, large)
    assert large["measured"]["p50"] > 2 * small["measured"]["p50"]
    print("android", small["measured"]["p50"], large["measured"]["p50"])
