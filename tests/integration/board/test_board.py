"""An emulated aarch64 board (`runs_on: {kind: emulated}`): provisioned once, reused,
and a place stages run on — the same build's outputs on x86 and on the board's aarch64
kernels, and an INT8 build gated on the board. Kept small: 8 samples (a second each,
emulated)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from edgebuild.boards.provision import Board, board_env, find_board, setup_board
from tests.conftest import REPO, edgebuild

pytestmark = [pytest.mark.board, pytest.mark.slow]

RECIPE = f"""\
name: rpi-small
model:
  onnx: {{package: rapidocr_onnxruntime, path: models/ch_ppocr_mobile_v2.0_cls_infer.onnx}}
inputs:
  - {{name: x, shape: [1, 3, 48, 192], dtype: float32}}
outputs: [save_infer_model/scale_0.tmp_1]
datasets:
  lines:
    kind: callable
    function: {REPO}/recipes/models/text_direction.py:lines
    kwargs: {{count: 4}}
  calibration:
    kind: callable
    function: {REPO}/recipes/models/text_direction.py:lines
    kwargs: {{count: 8, seed: 7}}
policy: {{unmeasurable: warn}}
targets:
"""


def run(tmp_path: Path, targets: str, name: str) -> tuple[int, dict]:  # type: ignore[type-arg]
    recipe = tmp_path / f"{name}.yaml"
    recipe.write_text(RECIPE + targets)
    out = tmp_path / name
    done = edgebuild("run", str(recipe), "--out", str(out), cwd=tmp_path)
    assert (out / "report.json").is_file(), done.stdout + done.stderr
    return done.returncode, json.loads((out / "report.json").read_text())


def outputs(report: dict, stage: str, cache: Path) -> np.ndarray:  # type: ignore[type-arg]
    key = next(s["key"] for s in report["stages"] if s["id"] == stage)
    (npz,) = cache.glob(f"objects/*/{key}/outputs.npz")
    with np.load(npz) as saved:
        return np.asarray(saved["output:save_infer_model/scale_0.tmp_1"])


def gates(report: dict, target: str) -> dict:  # type: ignore[type-arg]
    return {g["gate"]: g for t in report["targets"] if t["name"] == target for g in t["gates"]}


def test_the_board_is_an_aarch64_python_made_once(board: Board) -> None:
    done = subprocess.run(
        [str(board.python), "-c", "import platform, onnxruntime; "
         "print(platform.machine(), onnxruntime.__version__)"],
        capture_output=True, text=True, timeout=300, env=board_env({"QEMU_CPU": "cortex-a72"}),
        check=False)
    assert done.returncode == 0, done.stderr
    machine, version = done.stdout.split()
    assert machine == "aarch64"
    assert version == board.info["wheels"]["onnxruntime"]  # type: ignore[index]
    assert "python3.11-minimal" in board.info["debs"]  # type: ignore[operator]
    again, made = setup_board("aarch64")  # the same key: reused, nothing downloaded
    assert not made and again.path == board.path == find_board("aarch64").path  # type: ignore[union-attr]
    assert not list(board.path.parent.glob(".partial-*"))


def test_one_build_on_x86_and_on_the_board(board: Board, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EDGEBUILD_CACHE_DIR", str(tmp_path / "cache"))
    accuracy = "{dataset: lines, min_top1_agreement: 100, min_cosine: 0.9999}"
    code, report = run(tmp_path, f"""\
  host-cpu:
    gates: {{accuracy: {accuracy}}}
  rpi4-arm:
    profile: rpi4-emulated
    gates: {{accuracy: {accuracy}, latency: {{percentile: 50, budget_ms: 33}},
             memory: {{max_mb: 60}}}}
""", "fp32")
    assert code == 0, report
    stages = {s["id"]: s for s in report["stages"]}
    assert stages["infer@rpi4-arm"]["worker"] == "emulated:aarch64/cortex-a72"
    assert stages["infer@host-cpu"]["worker"] == ""
    # The same ONNX Runtime version and model, two instruction sets: the softmax outputs
    # differ only by float rounding (4.8e-7 measured), and every decision is the same.
    x86 = outputs(report, "infer@host-cpu", tmp_path / "cache")
    arm = outputs(report, "infer@rpi4-arm", tmp_path / "cache")
    assert x86.shape == arm.shape == (8, 2)
    np.testing.assert_allclose(arm, x86, atol=1e-4)
    assert (arm.argmax(1) == x86.argmax(1)).all()
    arm_gates = gates(report, "rpi4-arm")
    assert arm_gates["accuracy"]["status"] == "passed"
    where = arm_gates["accuracy"]["message"]
    assert "emulated aarch64, qemu-user -cpu cortex-a72" in where and "asimd; not" in where
    for timed in ("latency", "memory"):  # the emulator's time is never the Pi's
        assert arm_gates[timed]["status"] == "unmeasurable"
        assert "emulator's, not the Raspberry Pi 4" in arm_gates[timed]["message"]


def test_an_int8_build_is_gated_on_the_board(board: Board, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EDGEBUILD_CACHE_DIR", str(tmp_path / "cache"))
    code, report = run(tmp_path, """\
  rpi4-arm-int8:
    profile: rpi4-emulated
    passes: [{quantize: &int8 {mode: static, calibration: calibration, per_channel: true}}]
    gates: {accuracy: {dataset: lines, min_top1_agreement: 100, min_cosine: 0.99}}
  # The same build (its stages are shared), with a limit INT8 cannot meet: it fails, on
  # the board's outputs.
  rpi4-arm-int8-exact:
    profile: rpi4-emulated
    passes: [{quantize: *int8}]
    gates: {accuracy: {dataset: lines, max_abs_error: 1.0e-9}}
""", "int8")
    assert code == 1, report  # a gate failed
    faithful = gates(report, "rpi4-arm-int8")["accuracy"]
    exact = gates(report, "rpi4-arm-int8-exact")["accuracy"]
    assert faithful["status"] == "passed" and exact["status"] == "failed", report["targets"]
    for gate in (faithful, exact):
        assert "emulated aarch64" in gate["message"]
    ran, reused = [s for s in report["stages"] if s["op"] == "infer"]
    assert ran["worker"] == "emulated:aarch64/cortex-a72"  # the second is the same stage
    assert reused["cached"] and reused["key"] == ran["key"]


def test_litert_on_the_board_runs_a_phones_cpu_kernels(board: Board, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The android targets' CPU path (LiteRT with XNNPACK) on an emulated Cortex-A76 (dot
    product, fp16) beside the same build on this machine. The model is PaddlePaddle's
    export, whose node names (`Softmax@0`) onnx2tf once refused as TensorFlow scopes."""
    monkeypatch.setenv("EDGEBUILD_CACHE_DIR", str(tmp_path / "cache"))
    accuracy = "{dataset: lines, min_top1_agreement: 100, min_cosine: 0.9999}"
    code, report = run(tmp_path, f"""\
  android-host:
    profile: android
    options: {{delegate: xnnpack, latency_on: host}}
    gates: {{accuracy: {accuracy}}}
  android-arm:
    profile: android-arm-emulated
    gates: {{accuracy: {accuracy}, latency: {{percentile: 50, budget_ms: 20}}}}
""", "litert")
    assert code == 0, report
    stages = {s["id"]: s for s in report["stages"]}
    assert stages["infer@android-arm"]["worker"] == "emulated:aarch64/cortex-a76"
    x86 = outputs(report, "infer@android-host", tmp_path / "cache")
    arm = outputs(report, "infer@android-arm", tmp_path / "cache")
    assert x86.shape == arm.shape == (8, 2)
    np.testing.assert_allclose(arm, x86, atol=1e-4)  # 1.2e-7 measured on 32 lines
    assert (arm.argmax(1) == x86.argmax(1)).all()
    arm_gates = gates(report, "android-arm")
    where = arm_gates["accuracy"]["message"]
    assert "qemu-user -cpu cortex-a76" in where and "asimddp" in where.split("; not")[0]
    assert "XNNPACK (the phone's CPU path)" in where and "a host figure" not in where
    assert arm_gates["latency"]["status"] == "unmeasurable"
