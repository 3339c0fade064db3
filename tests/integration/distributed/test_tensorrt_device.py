"""The TensorRT device stages dispatched to a loopback Dask worker tagged `jetson-orin` that
has no TensorRT: the build stage lands on it and says what is missing there."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import edgebuild
from tests.integration.distributed.test_cluster import report

pytest.importorskip("distributed", reason="--cluster needs Dask distributed "
                    "(extra: distributed)")
pytestmark = pytest.mark.distributed


def jetson_project(tiny_project: Callable[..., Path]) -> Path:
    recipe = tiny_project()
    recipe.write_text(recipe.read_text().replace("targets:\n  host-cpu:",
                                                 "targets:\n  jetson-orin-nano:"))
    return recipe


def test_edgebuild_worker_refuses_to_serve_a_jetson_without_tensorrt(tmp_path: Path) -> None:
    result = edgebuild("worker", "tcp://127.0.0.1:1", "--target", "jetson-orin-nano")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "backend 'tensorrt' needs tensorrt (tools missing on this worker)" in result.stderr
    assert "JetPack" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.slow
def test_engine_stage_goes_to_the_tagged_worker_and_names_what_it_lacks(
        tiny_project: Callable[..., Path], tmp_path: Path, scheduler: str) -> None:
    recipe = jetson_project(tiny_project)
    # A plain Dask worker holding the tag, as someone would start one by hand on a board
    # whose TensorRT is missing (`edgebuild worker --target` would refuse to join).
    worker = subprocess.Popen(
        [sys.executable, "-m", "distributed.cli.dask_worker", scheduler, "--nthreads", "1",
         "--resources", "jetson-orin=1", "--name", "jetson", "--no-dashboard"],
        cwd=recipe.parent, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        # Its INFO lines say when it joined, whatever an earlier in-process executor set
        # (execute/logs.py: quiet_dask quiets Dask through the environment).
        env={**os.environ, "DASK_LOGGING__DISTRIBUTED": "info"})
    assert worker.stdout is not None
    for line in worker.stdout:
        if "Registered to" in line or "Starting established connection" in line:
            break
    try:
        result = edgebuild("run", str(recipe), "--cluster", scheduler, "--out",
                           str(tmp_path / "out"), cwd=recipe.parent)
        assert result.returncode == 1, result.stdout + result.stderr  # policy: fail
        stages = {s["id"]: s for s in report(tmp_path / "out")["stages"]}
        build = stages["device-build@jetson-orin-nano"]
        assert build["outcome"] == "unmeasurable"
        assert build["message"].startswith("tools missing on worker ")
        assert "tensorrt (JetPack's python3-libnvinfer" in build["message"]
        assert build["worker"].startswith("tcp://127.0.0.1:")  # it ran there, not here
        assert stages["measure-latency@jetson-orin-nano"]["outcome"] == "unmeasurable"
        assert stages["compile@jetson-orin-nano"]["outcome"] == "built"
        assert stages["infer@jetson-orin-nano"]["outcome"] == "built"  # ONNX Runtime
        assert "Traceback" not in result.stdout + result.stderr
    finally:
        worker.kill()
        worker.wait()
