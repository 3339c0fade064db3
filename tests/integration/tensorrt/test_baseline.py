"""`run --baseline` for a backend that builds on the device (issue 33, defect 3): the
baseline's TensorRT-ready ONNX is built into an engine on the device, like this build's,
and the two engines are compared; without the device, "not measurable here" — never the
baseline's ONNX timed in ONNX Runtime against this build's engine.

Everything here runs on this machine (the ONNX side of the backend); the device build
itself is tests/integration/distributed/test_tensorrt_device.py's."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import edgebuild

pytest.importorskip("onnxruntime", reason="compile checks the ONNX with onnxruntime")
pytest.importorskip("polygraphy", reason="sanitize needs polygraphy (extra: tensorrt-onnx)")

RECIPE = """\
name: tiny-trt
model: {onnx: tiny.onnx}
inputs: [{name: x, shape: [1, 4]}]
outputs: [y]
policy: {unmeasurable: warn}
targets:
  jetson-orin-nano:
    gates: {latency: {budget_ms: 5}}
"""
T = "jetson-orin-nano"


def run(recipe: Path, out: str, *args: str) -> dict[str, Any]:
    done = edgebuild("run", str(recipe), "--out", str(recipe.parent / out), "-q", *args)
    assert "Traceback" not in done.stdout + done.stderr, done.stdout + done.stderr
    assert done.returncode == 0, done.stdout + done.stderr  # unmeasurable: warn
    report: dict[str, Any] = json.loads((recipe.parent / out / "report.json").read_text())
    return report


@pytest.mark.slow
def test_a_tensorrt_baseline_is_compared_as_an_engine_or_not_at_all(
        tiny_project: Callable[..., Path]) -> None:
    recipe = tiny_project(RECIPE)
    run(recipe, "base")
    report = run(recipe, "head", "--baseline", str(recipe.parent / "base" / "report.json"))
    by_id = {s["id"]: s for s in report["stages"]}
    compare = by_id[f"compare-latency@{T}"]
    # Engine against engine: both sides are device builds.
    assert compare["inputs"] == [f"device-build[baseline]@{T}", f"device-build@{T}"]
    built = by_id[f"device-build[baseline]@{T}"]
    assert built["inputs"] == [f"import-baseline@{T}"]
    for stage in (built, compare):
        assert stage["outcome"] == "unmeasurable", stage
        assert "not buildable here: TensorRT needs an NVIDIA GPU" in stage["message"], stage
    assert by_id[f"import-baseline@{T}"]["metadata"]["profiles"] == \
        by_id[f"compile@{T}"]["metadata"]["profiles"]
    gates = {g["gate"]: g for g in report["targets"][0]["gates"]}
    assert gates["regression"]["status"] == "unmeasurable", gates["regression"]
    assert "baseline_p50" not in gates["regression"]["measured"]
    manifest = json.loads((recipe.parent / "base" / "artifacts" / T / "manifest.json")
                          .read_text())
    assert manifest["format"] == "tensorrt-onnx" and manifest["builds_on_device"] is True
    assert "profiles" in manifest["runner_metadata"]  # what the device build reads
