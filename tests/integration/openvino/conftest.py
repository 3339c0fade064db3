"""Shared by the OpenVINO tests: vendor telemetry off, as in edgebuild's own workers."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def no_vendor_telemetry(monkeypatch: pytest.MonkeyPatch) -> None:
    # OpenVINO's converter and NNCF skip telemetry when CI=true; the executor sets
    # it for workers, and in-process compiles in these tests need it too.
    monkeypatch.setenv("CI", "true")
