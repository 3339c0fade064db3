"""Stages that time nothing share the CPU; timing stages keep the runtimes' defaults."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import onnxruntime as ort
import pytest

from edgebuild.core.share_cpu import SHARE_CPU_ENV, yield_when_idle
from edgebuild.execute.task import stage_env

SPIN = "session.intra_op.allow_spinning"


def test_a_stage_that_times_nothing_lets_idle_threads_sleep(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    env = stage_env(share_cpu=True)
    assert env[SHARE_CPU_ENV] == "1"
    assert env["OMP_WAIT_POLICY"] == "PASSIVE"


def test_a_timing_stage_keeps_the_runtime_defaults(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    monkeypatch.setenv(SHARE_CPU_ENV, "1")  # even inherited from a sharing parent
    env = stage_env(share_cpu=False)
    assert SHARE_CPU_ENV not in env
    assert "OMP_WAIT_POLICY" not in env


def test_the_users_openmp_wait_policy_is_kept(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    assert stage_env(share_cpu=True)["OMP_WAIT_POLICY"] == "ACTIVE"


def test_onnxruntime_sessions_stop_spinning_only_in_a_sharing_stage(
        monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv(SHARE_CPU_ENV, raising=False)
    with pytest.raises(RuntimeError):  # ORT: no such entry, the default (spinning) holds
        yield_when_idle(ort.SessionOptions()).get_session_config_entry(SPIN)
    monkeypatch.setenv(SHARE_CPU_ENV, "1")
    assert yield_when_idle(ort.SessionOptions()).get_session_config_entry(SPIN) == "0"


SESSIONS_OF_A_STAGE = """
import sys, onnx
from onnx import TensorProto, helper
from edgebuild.core.share_cpu import sessions_yield_when_idle
sessions_yield_when_idle()
sessions_yield_when_idle()  # once is what counts
import onnxruntime as ort
from onnxruntime.quantization.calibrate import create_calibrator

x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
path = sys.argv[1]
onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
sessions = [ort.InferenceSession(path, providers=["CPUExecutionProvider"]),
            ort.InferenceSession(path, ort.SessionOptions(), ["CPUExecutionProvider"]),
            create_calibrator(path, augmented_model_path=path + ".aug.onnx").infer_session]
for s in sessions:
    try:
        print(s.get_session_options().get_session_config_entry("session.intra_op.allow_spinning"))
    except RuntimeError:
        print("default")
"""


@pytest.mark.parametrize("sharing", [True, False])
def test_every_session_of_a_sharing_stage_sleeps_when_idle_library_ones_too(
        sharing: bool, tmp_path: Path) -> None:
    """The worker calls sessions_yield_when_idle: onnxruntime's own quantization
    calibrator opens its sessions with options of its own, and they sleep too."""
    env = {k: v for k, v in os.environ.items() if k != SHARE_CPU_ENV}
    if sharing:
        env[SHARE_CPU_ENV] = "1"
    out = subprocess.run([sys.executable, "-c", SESSIONS_OF_A_STAGE, str(tmp_path / "m.onnx")],
                         env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == (["0"] * 3 if sharing else ["default"] * 3), out.stderr
    assert "already exists" not in out.stderr
