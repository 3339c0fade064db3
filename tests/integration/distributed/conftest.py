"""A real Dask scheduler on loopback, shared by the distributed tests."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def dask_logging_restored(monkeypatch: pytest.MonkeyPatch) -> None:
    """An in-process executor quiets Dask through the environment (quiet_dask): undo it
    after each test, so a later test's worker subprocess still logs when it joins."""
    import os

    monkeypatch.setenv("DASK_LOGGING__DISTRIBUTED",
                       os.environ.get("DASK_LOGGING__DISTRIBUTED", "info"))


@pytest.fixture
def scheduler(tmp_path: Path) -> Iterator[str]:
    """A real Dask scheduler on loopback, as a build farm would run it."""
    address_file = tmp_path / "scheduler.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
         "--port", "0", "--no-dashboard", "--scheduler-file", str(address_file)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not address_file.is_file() and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(0.2)  # the file is written before it is complete at times
        yield str(json.loads(address_file.read_text())["address"])
    finally:
        proc.kill()
        proc.wait()
