"""The TFLite backend end to end through the real CLI: onnx2tf, TFLiteConverter,
the ai-edge-litert interpreter, gates, the cache, and a clear error for an op
onnx2tf cannot convert."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from edgebuild.errors import ExitCode
from tests.conftest import FASHION, cached_rerun, edgebuild, fashion_recipe, retimed

pytestmark = [pytest.mark.tflite, pytest.mark.slow]

HEAD = fashion_recipe("fashion-tflite", test_limit=500)
QUICK = "measure: {threads: 2, min_iterations: 50, min_seconds: 0.2, max_busy_share: null}"

BOTH_PRECISIONS = HEAD + f"""
targets:
  android:
    options: {{latency_on: host}}
    {QUICK}
    gates:
      accuracy: {{dataset: test, min_top1: 88, min_top1_agreement: 99.5}}
      latency: {{budget_ms: 50}}
  android-int8:
    profile: android
    options: {{precision: int8, io_type: int8, calibration_dataset: calibration,
              latency_on: host}}
    {QUICK}
    gates:
      accuracy: {{dataset: test, min_top1: 88, max_top1_drop: 1.5}}
"""

ON_DEVICE = HEAD + f"""
policy: {{unmeasurable: warn}}
targets:
  android:                      # the profile's default: latency_on: device
    {QUICK}
    gates:
      latency: {{budget_ms: 50}}
"""

needs_fashion = pytest.mark.skipif(not FASHION.is_dir(),
                                   reason="needs Debian's dataset-fashion-mnist")


def target(report: dict[str, Any], name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(t for t in report["targets"] if t["name"] == name)
    return found


def gate(entry: dict[str, Any], name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(g for g in entry["gates"] if g["gate"] == name)
    return found


def stage(report: dict[str, Any], stage_id: str) -> dict[str, Any]:
    found: dict[str, Any] = next(s for s in report["stages"] if s["id"] == stage_id)
    return found


@needs_fashion
def test_float32_and_int8_build_gate_and_cache(tmp_path: Path) -> None:
    (tmp_path / "recipe.yaml").write_text(BOTH_PRECISIONS)
    plan = edgebuild("plan", "recipe.yaml", cwd=tmp_path)
    assert plan.returncode == 0, plan.stderr
    # One onnx2tf conversion, shared by both precisions.
    stage_ids = [line.split()[1] for line in plan.stdout.splitlines()[1:]]
    assert stage_ids.count("onnx-to-tf") == 1, plan.stdout

    cold = edgebuild("run", "recipe.yaml", "--out", "out", cwd=tmp_path)
    assert cold.returncode == 0, cold.stdout + cold.stderr
    assert "Traceback" not in cold.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text())

    fp32 = target(report, "android")
    accuracy = gate(fp32, "accuracy")["measured"]
    assert accuracy["samples"] == 500
    assert accuracy["top1_agreement"] >= 99.5  # NHWC conversion kept the function
    assert accuracy["max_abs_error"] < 1e-3
    int8 = target(report, "android-int8")
    assert gate(int8, "accuracy")["measured"]["top1"] >= 88

    compiled = stage(report, "compile@android-int8")["metadata"]
    (model_input,) = compiled["io"]["inputs"]
    assert model_input["dtype"] == "int8" and model_input["model_shape"][1:] == [28, 28, 1]
    assert model_input["perm"] == [0, 2, 3, 1]
    assert compiled["calibration_samples"] == 100
    assert {row["op"] for row in compiled["nnapi"]["ops"]} >= {"CONV_2D", "FULLY_CONNECTED"}
    latency = stage(report, "measure-latency@android")["metadata"]
    assert latency["where"].startswith("host:")
    summary = (tmp_path / "out" / "summary.md").read_text()
    assert "android-int8: NNAPI delegate coverage at Android API 30" in summary

    busy = retimed(tmp_path / "out")
    cached = edgebuild("run", "recipe.yaml", "--out", "out", cwd=tmp_path)
    assert cached.returncode == 0, cached.stdout + cached.stderr
    assert cached_rerun(busy) in cached.stdout

    # The regression gate runs the baseline's .tflite with its recorded tensor mapping.
    ab = edgebuild("run", "recipe.yaml", "--out", "again", "--baseline", "out/report.json",
                   cwd=tmp_path)
    assert ab.returncode != ExitCode.STAGE_FAILED, ab.stdout + ab.stderr
    again = json.loads((tmp_path / "again" / "report.json").read_text())
    regression = gate(target(again, "android"), "regression")
    assert regression["measured"]["ratio"] > 0


@needs_fashion
def test_device_latency_is_not_measurable_without_a_phone(tmp_path: Path) -> None:
    (tmp_path / "recipe.yaml").write_text(ON_DEVICE)
    run = edgebuild("run", "recipe.yaml", "--out", "out", cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr  # policy: warn
    assert "not measurable here" in run.stdout
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    latency = gate(target(report, "android"), "latency")
    assert latency["status"] == "unmeasurable", latency


def test_unconvertible_op_names_op_node_and_shapes(tmp_path: Path) -> None:
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Relu", ["image"], ["r"], name="first_relu"),
         helper.make_node("CastLike", ["r", "image"], ["logits"], name="the_castlike")],
        "g", [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 3, 8, 8])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
              tmp_path / "model.onnx")
    (tmp_path / "recipe.yaml").write_text(
        "name: bad-op\nmodel: {onnx: model.onnx}\n"
        "inputs: [{name: image, shape: [1, 3, 8, 8], dtype: float32}]\n"
        "outputs: [logits]\ntargets: {android: {options: {latency_on: host}}}\n")
    run = edgebuild("run", "recipe.yaml", "--out", "out", cwd=tmp_path)
    assert run.returncode == ExitCode.STAGE_FAILED, run.stdout + run.stderr
    output = run.stdout + run.stderr
    assert "Traceback" not in output
    assert "onnx2tf cannot convert op 'CastLike' (node 'the_castlike')" in output
    assert "r [1, 3, 8, 8]" in output  # the shapes around it
