"""The fleet tests' shared build (a real run of the tiny ONNX project, three targets:
two pass their gates, one fails its size gate), signing keys and helpers."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import textwrap
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from edgebuild import api
from edgebuild.cache import signing
from edgebuild.core.manifest import read_manifest
from edgebuild.errors import ExitCode
from tests.conftest import make_tiny_onnx

REGISTRY = shutil.which("docker-registry")
MEASURE = "{warmup_iterations: 1, min_iterations: 5, max_busy_share: null, min_seconds: 0}"
RECIPE = f"""\
name: tiny
model: {{onnx: tiny.onnx}}
inputs: [{{name: x, shape: [1, 4]}}]
outputs: [y]
datasets:
  samples: {{kind: npz, path: samples.npz, labels: y}}
passes:
  - onnx-optimize
targets:
  host-cpu:
    measure: {MEASURE}
    gates:
      accuracy: {{dataset: samples, min_top1_agreement: 99}}
      latency: {{budget_ms: 1000}}
  edge-box:
    profile: host-cpu
    options: {{graph_optimization_level: basic}}
    measure: {MEASURE}
    gates:
      accuracy: {{dataset: samples, min_top1_agreement: 99}}
  too-big:
    profile: host-cpu
    gates:
      size: {{max_mb: 0.000001}}
"""


def tiny_project(project: Path, recipe: str) -> Path:
    """`project` with the tiny ONNX model, its 16 samples and `recipe` as tiny.yaml."""
    import numpy as np

    make_tiny_onnx(project / "tiny.onnx")
    rng = np.random.default_rng(0)
    np.savez(project / "samples.npz", x=rng.standard_normal((16, 4)).astype(np.float32),
             y=rng.integers(0, 3, 16))
    (project / "tiny.yaml").write_text(textwrap.dedent(recipe))
    return project


@pytest.fixture(scope="module")
def build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real build folder (report.json, artifacts/<target>/manifest.json)."""

    project = tiny_project(tmp_path_factory.mktemp("project"), RECIPE)
    with pytest.MonkeyPatch.context() as env:
        env.setenv("EDGEBUILD_QUIET_WAIT_S", "3")
        report = api.run(project / "tiny.yaml", api.RunOptions(
            out=project / "build", cache_dir=project / "cache"))
    passed = {t.name: all(g.status.value != "failed" for g in t.gates)
              for t in report.targets}
    assert passed == {"host-cpu": True, "edge-box": True, "too-big": False}, passed
    return project / "build"


@pytest.fixture
def keys(tmp_path: Path) -> dict[str, Path]:
    """The release key (trusted by the devices) and a stranger's key."""
    signing.generate(tmp_path / "keys" / "release.pem")
    signing.generate(tmp_path / "keys" / "stranger.pem")
    return {"release": tmp_path / "keys" / "release.pem",
            "trusted": tmp_path / "keys" / "release.pub",
            "stranger": tmp_path / "keys" / "stranger.pem"}


def ok(done: Any, code: int = ExitCode.OK) -> str:
    text = str(done.stdout + done.stderr)
    assert "Traceback" not in text and "internal error" not in text, text
    assert done.returncode == code, text
    return text


def state(root: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((root / "state.json").read_text())
    return data


def active_target(root: Path) -> str:
    return read_manifest(root / "current" / "manifest.json").target


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """http://127.0.0.1:PORT and the registry's storage folder."""
    if REGISTRY is None:
        pytest.skip("docker-registry is not installed (apt-get install docker-registry; "
                    "scripts/setup.sh does it)")
    port = free_port()
    data = tmp_path / "registry-data"
    config = tmp_path / "registry.yml"
    config.write_text(f"""\
version: 0.1
log: {{level: error}}
storage:
  filesystem: {{rootdirectory: {data}}}
http:
  addr: 127.0.0.1:{port}
""")
    log = (tmp_path / "registry.log").open("w")
    process = subprocess.Popen([REGISTRY, "serve", str(config)], stdout=log,
                               stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(f"{url}/v2/", timeout=1).close()
                break
            except (urllib.error.URLError, OSError):
                if process.poll() is not None:
                    pytest.fail("docker-registry exited: "
                                f"{(tmp_path / 'registry.log').read_text()}")
                time.sleep(0.1)
        yield url, data
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()
