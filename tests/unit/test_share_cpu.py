"""Stages that time nothing share the CPU; timing stages keep the runtimes' defaults."""

from __future__ import annotations

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
