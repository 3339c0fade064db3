"""The QNN backend for real: QDQ for the HTP, an EPContext model and context binary for
the profile's SoC, accuracy on the x86 HTP emulator, the partition table, and a node
the HTP cannot take caught instead of silently run on the CPU."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import FASHION, edgebuild, fashion_recipe

pytestmark = pytest.mark.qnn

TINY = """\
name: qtiny
model: {onnx: tiny.onnx}
inputs: [{name: x, shape: [1, 4]}]
outputs: [y]
datasets:
  samples: {kind: npz, path: samples.npz, labels: y}
targets:
  snapdragon:
    policy: {unmeasurable: warn}
    gates:
      accuracy: {dataset: samples, min_top1_agreement: 90, min_cosine: 0.99}
      latency: {budget_ms: 5}
  snapdragon-int8:
    profile: snapdragon
    options: {precision: int8, calibration_dataset: samples}
    gates: {accuracy: {dataset: samples, min_top1_agreement: 90, min_cosine: 0.99}}
"""


def report_of(out: Path) -> dict:  # type: ignore[type-arg]
    return json.loads((out / "report.json").read_text())  # type: ignore[no-any-return]


@pytest.mark.slow
def test_context_binaries_gated_on_the_emulator(tiny_project: Callable[..., Path],
                                                tmp_path: Path) -> None:
    recipe = tiny_project(TINY)
    out = tmp_path / "out"
    result = edgebuild("run", str(recipe), "--out", str(out))
    assert result.returncode == 0, result.stdout + result.stderr
    report = report_of(out)
    for name in ("snapdragon", "snapdragon-int8"):
        folder = out / "artifacts" / name
        assert (folder / "model_ctx.onnx").is_file() and (folder / "model_ctx_qnn.bin").is_file()
        target = next(t for t in report["targets"] if t["name"] == name)
        accuracy = next(g for g in target["gates"] if g["gate"] == "accuracy")
        assert accuracy["status"] == "passed"
        assert "QNN HTP partition" in target["notes"]["qnn_partition.md"]
    stages = {s["id"]: s for s in report["stages"]}
    int8 = stages["compile@snapdragon-int8"]["metadata"]
    assert int8["partition"]["cpu_nodes"] == 0 and int8["partition"]["htp_nodes"] >= 3
    assert int8["quantization"]["activations"] == "QUInt8"
    assert stages["infer@snapdragon"]["metadata"]["where"].startswith("host: x86-64 QNN HTP")
    latency = next(g for t in report["targets"] for g in t["gates"] if g["gate"] == "latency")
    assert latency["status"] == "unmeasurable"
    assert "no Snapdragon device attached" in latency["message"]
    assert "QNN HTP partition" in (out / "summary.md").read_text()
    again = edgebuild("run", str(recipe), "--out", str(out))
    assert again.returncode == 0
    rerun = report_of(out)["stages"]
    # Everything is cached; only "is a phone attached now?" is asked again.
    assert {s["outcome"] for s in rerun if not s["cached"]} == {"unmeasurable"}


def htp_refuses(path: Path) -> None:
    """MatMul then Hardmax: QNN's HTP has no Hardmax, so that node would go to the CPU."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["h"], name="scores"),
         helper.make_node("Hardmax", ["h"], ["y"], name="the_hardmax")],
        "refused", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
        [numpy_helper.from_array(np.eye(4, dtype=np.float32), "W")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))


@pytest.mark.slow
def test_a_cpu_fallback_is_caught_not_measured(tiny_project: Callable[..., Path],
                                               tmp_path: Path) -> None:
    fp16_only = TINY.split("  snapdragon-int8:")[0]
    recipe = tiny_project(fp16_only)
    htp_refuses(recipe.parent / "tiny.onnx")
    failed = edgebuild("run", str(recipe), "--out", str(tmp_path / "fail"))
    assert failed.returncode == 3, failed.stdout + failed.stderr
    assert "the HTP cannot run 1 node(s) (Hardmax: the_hardmax)" in failed.stderr
    assert "cpu_fallback: report" in failed.stderr and "Traceback" not in failed.stderr
    recipe.write_text(recipe.read_text().replace(
        "    policy: {unmeasurable: warn}\n",
        "    policy: {unmeasurable: warn}\n    options: {cpu_fallback: report}\n", 1))
    reported = edgebuild("run", str(recipe), "--out", str(tmp_path / "report"))
    assert reported.returncode == 0, reported.stdout + reported.stderr
    stages = {s["id"]: s for s in report_of(tmp_path / "report")["stages"]}
    partition = stages["compile@snapdragon"]["metadata"]["partition"]
    assert partition["cpu_op_types"] == ["Hardmax"] and partition["cpu_nodes"] == 1


QDQ_TARGETS = """\
  snapdragon-qdq:
    profile: snapdragon
    passes: [quantize: {mode: static, calibration: samples}]
    options: {precision: qdq}
    gates: {accuracy: {dataset: samples, min_top1_agreement: 90, min_cosine: 0.99}}
"""


@pytest.mark.slow
def test_a_quantize_pass_output_taken_as_is(tiny_project: Callable[..., Path],
                                            tmp_path: Path) -> None:
    """`precision: qdq`: the quantize pass's Q/DQ (the encodings other backends get) goes
    to the HTP unchanged; TensorRT's symmetric form is refused before the compile."""
    recipe = tiny_project(TINY.split("  snapdragon:")[0] + QDQ_TARGETS)
    out = tmp_path / "out"
    result = edgebuild("run", str(recipe), "--out", str(out))
    assert result.returncode == 0, result.stdout + result.stderr
    stages = {s["id"]: s for s in report_of(out)["stages"]}
    compiled = stages["compile@snapdragon-qdq"]["metadata"]
    assert compiled["quantization"]["source"] == "the input's Q/DQ, as is"
    assert compiled["quantization"]["quantize_nodes"] >= 1
    assert compiled["partition"]["cpu_nodes"] == 0 and compiled["partition"]["htp_nodes"] >= 3
    accuracy = next(g for t in report_of(out)["targets"] for g in t["gates"]
                    if g["gate"] == "accuracy")
    assert accuracy["status"] == "passed", accuracy["message"]
    recipe.write_text(recipe.read_text().replace(
        "{mode: static, calibration: samples}", "{preset: tensorrt, calibration: samples}"))
    refused = edgebuild("run", str(recipe), "--out", str(tmp_path / "trt"))
    assert refused.returncode != 0 and "Traceback" not in refused.stderr
    assert "the HTP takes uint8/uint16 activations" in refused.stdout + refused.stderr


def test_int8_without_calibration_is_a_recipe_error(tiny_project: Callable[..., Path]) -> None:
    recipe = tiny_project(TINY.replace(", calibration_dataset: samples", ""))
    result = edgebuild("validate", str(recipe))
    assert result.returncode == 2 and "needs `calibration_dataset`" in result.stderr
    assert f"{recipe}:" in result.stderr


@pytest.mark.slow
@pytest.mark.skipif(not FASHION.is_dir(), reason="needs Debian's dataset-fashion-mnist")
def test_fashion_mnist_int8_on_the_emulator_keeps_its_accuracy(tmp_path: Path) -> None:
    recipe = tmp_path / "fashion-qnn.yaml"
    recipe.write_text(fashion_recipe("fashion-qnn", test_limit=1000, calibration_limit=100)
                      + """
targets:
  snapdragon-int8:
    profile: snapdragon
    options: {precision: int8, calibration_dataset: calibration}
    gates: {accuracy: {dataset: test, min_top1: 88, max_top1_drop: 1.5}}
""")
    result = edgebuild("run", str(recipe), "--out", str(tmp_path / "out"))
    assert result.returncode == 0, result.stdout + result.stderr
    (target,) = report_of(tmp_path / "out")["targets"]
    accuracy = target["gates"][0]["measured"]
    assert accuracy["samples"] == 1000 and accuracy["top1_drop"] <= 1.5
