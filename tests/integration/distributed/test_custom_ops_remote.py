"""Custom-op files travel to a remote worker by content: a worker that cannot see the
recipe's folder still exports the op, runs the ORT kernel and the OpenVINO conversion,
and gates each build against PyTorch."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import REPO, edgebuild
from tests.integration.distributed.test_cluster import hidden_worker

pytest.importorskip("distributed", reason="--cluster needs Dask distributed "
                    "(extra: distributed)")
pytest.importorskip("openvino", reason="the intel-cpu target needs openvino")
pytestmark = [pytest.mark.distributed, pytest.mark.slow]


@pytest.mark.skipif(not Path("/usr/share/datasets/fashion-mnist").is_dir(),
                    reason="needs the Debian package dataset-fashion-mnist (scripts/setup.sh)")
def test_kernels_reach_a_worker_that_cannot_see_them(tmp_path: Path, scheduler: str) -> None:
    project = tmp_path / "project"
    shutil.copytree(REPO / "recipes" / "models", project / "models",
                    ignore=shutil.ignore_patterns("__pycache__", "fashion_mnist*"))
    recipe = project / "custom-op-attention.yaml"
    recipe.write_text((REPO / "recipes" / "custom-op-attention.yaml").read_text())
    worker = hidden_worker(scheduler, [project], "--name", "elsewhere")
    try:
        result = edgebuild("run", str(recipe), "--cluster", scheduler, "--target", "host-cpu",
                           "--target", "intel-cpu", "--out", str(tmp_path / "out"),
                           "--cache-dir", str(tmp_path / "cache"))
    finally:
        worker.kill()
        worker.wait()
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert all(s["worker"] for s in report["stages"])
    for target in report["targets"]:
        accuracy = next(g for g in target["gates"] if g["gate"] == "accuracy")
        assert accuracy["status"] == "passed"
        assert accuracy["measured"]["max_abs_error"] < 1e-4
