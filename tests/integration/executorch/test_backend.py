"""The ExecuTorch backend for real, on the committed Fashion-MNIST CNN: PyTorch -> .pte
(XNNPACK fp32, PT2E int8 calibrated on the recipe's data), run in ExecuTorch's runtime
for the accuracy gates and host latency, the delegation table, a second run that
executes nothing, and models that do not export or lower named in the error."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import FASHION, QUICK_TIMING, REPO, edgebuild, fashion_recipe

pytestmark = [pytest.mark.executorch, pytest.mark.slow]

SIGN_GATE = REPO / "tests" / "models" / "sign_gate.py"  # data-dependent control flow
INVERSE = REPO / "tests" / "models" / "matrix_inverse.py"  # exports, does not lower

TIMING = json.dumps(QUICK_TIMING | {"threads": 1})
TARGETS = f"""
policy: {{unmeasurable: warn}}
targets:
  android-executorch:            # the profile's default: latency on the phone
    inherit_passes: false
    gates:
      accuracy: {{dataset: test, min_top1: 88, max_top1_drop: 0.5, min_cosine: 0.9999}}
      latency: {{budget_ms: 50}}
      size: {{max_mb: 1}}
  android-executorch-int8:
    profile: android-executorch
    inherit_passes: false
    options: {{precision: int8, calibration_dataset: calibration, latency_on: host}}
    measure: {TIMING}
    gates:
      accuracy: {{dataset: test, min_top1: 87, max_top1_drop: 2, min_cosine: 0.99}}
      latency: {{budget_ms: 50}}
      size: {{max_mb: 0.3}}
"""


def report_of(out: Path) -> dict:  # type: ignore[type-arg]
    return json.loads((out / "report.json").read_text())  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def executorch_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not FASHION.is_dir():
        pytest.skip("needs Debian's dataset-fashion-mnist")
    folder = tmp_path_factory.mktemp("executorch")
    recipe = folder / "fashion-executorch.yaml"
    recipe.write_text(fashion_recipe("fashion-executorch", test_limit=300) + TARGETS)
    result = edgebuild("run", str(recipe), "--out", str(folder / "out"), "--cache-dir",
                       str(folder / "cache"))  # the module's own: built once, for every test
    assert result.returncode == 0, result.stdout + result.stderr
    return folder


def test_fp32_and_int8_pte_pass_their_gates_with_host_labels(executorch_build: Path) -> None:
    report = report_of(executorch_build / "out")
    gates = {(t["name"], g["gate"]): g for t in report["targets"] for g in t["gates"]}
    for target in ("android-executorch", "android-executorch-int8"):
        accuracy = gates[(target, "accuracy")]
        assert accuracy["status"] == "passed", accuracy["message"]
        assert "ExecuTorch runtime" in accuracy["details"]["where"]
    # fp32: the .pte computes what PyTorch does (the gate's cosine >= 0.9999 passed).
    assert gates[("android-executorch", "accuracy")]["measured"]["cosine"] >= 0.9999
    # The profile's default times the phone, which is not implemented: said, not faked.
    device = gates[("android-executorch", "latency")]
    assert device["status"] == "unmeasurable"
    assert "executor_runner over adb" in device["message"]
    host = gates[("android-executorch-int8", "latency")]
    assert host["status"] == "passed", host["message"]
    assert "a host figure, not the phone's" in host["message"]


def test_delegation_table_lists_what_xnnpack_took(executorch_build: Path) -> None:
    out = executorch_build / "out"
    stages = {s["id"]: s for s in report_of(out)["stages"]}
    fp32 = stages["compile@android-executorch"]["metadata"]
    int8 = stages["compile@android-executorch-int8"]["metadata"]
    for meta in (fp32, int8):
        ops = {row["op"]: row for row in meta["delegation"]["ops"]}
        # The CNN's 4 convolutions and its classifier all run in XNNPACK.
        assert ops["aten_convolution_default"] == {
            "op": "aten_convolution_default", "delegated": 4, "portable": 0}
        assert ops["aten_linear_default"]["delegated"] == 1
        assert meta["delegation"]["subgraphs"] >= 1
    int8_ops = {row["op"] for row in int8["delegation"]["ops"]}
    assert "quantized_decomposed_quantize_per_tensor_default" in int8_ops
    assert int8["calibration_samples"] == 100
    # int8 weights: the program is well under half the fp32 one.
    assert int8["program_bytes"] < fp32["program_bytes"] / 2
    note = (out / "artifacts" / "android-executorch" / "executorch_delegation.md").read_text()
    assert "| aten_convolution_default | 4 | 0 |" in note
    assert "ExecuTorch delegation" in (out / "summary.md").read_text()


def test_the_pte_loads_and_runs_in_the_runtime(executorch_build: Path) -> None:
    """The built file itself, in ExecuTorch's runtime, against eager PyTorch."""
    import torch

    from edgebuild.backends.executorch.runner import ExecutorchRunner
    from edgebuild.frontend.torch_model import build_torch_model

    out = executorch_build / "out"
    manifest = json.loads((out / "artifacts" / "android-executorch" / "manifest.json")
                          .read_text())
    io = manifest["runner_metadata"]["io"]
    models = REPO / "recipes" / "models"
    model = build_torch_model({"factory": f"{models / 'fashion_mnist_cnn.py'}:build",
                               "weights": str(models / "fashion_mnist_cnn.pt")}, REPO)
    x = np.random.default_rng(0).standard_normal((1, 1, 28, 28)).astype(np.float32)
    with ExecutorchRunner(out / "artifacts" / "android-executorch" / "model.pte", io,
                          threads=1) as runner:
        got = runner.infer({"image": x})["logits"]
    with torch.no_grad():
        expected = model(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def test_a_second_run_executes_nothing(executorch_build: Path) -> None:
    again = edgebuild("run", str(executorch_build / "fashion-executorch.yaml"), "--out",
                      str(executorch_build / "out"), "--cache-dir",
                      str(executorch_build / "cache"))
    assert again.returncode == 0, again.stdout + again.stderr
    rerun = report_of(executorch_build / "out")["stages"]
    assert [s["id"] for s in rerun if not s["cached"] and s["outcome"] != "unmeasurable"] == []


def failed_run(tmp_path: Path, model: Path, shape: list[int]) -> str:
    """What a user sees when a one-target ExecuTorch recipe of `model` fails to build."""
    recipe = tmp_path / "model.yaml"
    recipe.write_text(f"""\
name: {model.stem.replace("_", "-")}
model: {{factory: {model}:build}}
inputs: [{{name: x, shape: {shape}}}]
outputs: [y]
targets:
  android-executorch:
    gates: {{size: {{max_mb: 1}}}}
""")
    result = edgebuild("run", str(recipe), "--out", str(tmp_path / "out"))
    assert result.returncode != 0
    return result.stdout + result.stderr


def test_data_dependent_control_flow_names_the_line(tmp_path: Path) -> None:
    said = failed_run(tmp_path, SIGN_GATE, [1, 8])
    assert "ExecuTorch: torch.export failed at sign_gate.py:" in said
    assert "if bool(y.sum() > 0)" in said
    assert "torch.where or torch.cond" in said


def test_an_op_without_an_executorch_kernel_is_named(tmp_path: Path) -> None:
    said = failed_run(tmp_path, INVERSE, [1, 16])
    assert "to_edge_transform_and_lower failed on aten.linalg_inv_ex.default" in said
    assert "not a Core ATen op" in said


def test_keep_float_names_modules_as_the_other_int8_paths_do() -> None:
    from pydantic import ValidationError

    from edgebuild.backends.executorch.lower import float_modules
    from edgebuild.backends.executorch.options import ExecutorchOptions
    from edgebuild.errors import PlanError
    from tests.conftest import load_module

    model = load_module(SIGN_GATE).build()
    # An ONNX node name (the quantize pass's exclude_nodes) means its PyTorch module.
    assert float_modules(model, ["/linear/Gemm", "linear"]) == ["linear", "linear"]
    with pytest.raises(PlanError, match="'lineer' is not a module") as raised:
        float_modules(model, ["lineer"])
    assert "linear" in (raised.value.hint or "")
    with pytest.raises(ValidationError, match="needs `precision: int8`"):
        ExecutorchOptions(keep_float=["linear"])
