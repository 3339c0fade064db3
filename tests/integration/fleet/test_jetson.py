"""The Jetson rule end to end (edgebuild/fleet/jetson.py): a real build of the tiny ONNX
project for jetson-orin-nano (the TensorRT-ready ONNX; the engine needs the Jetson),
published and promoted; the agent for that target must build the engine on the device
with trtexec, and refuses — nothing activated, state.json says why — where it cannot.
The build itself needs trtexec on an NVIDIA GPU: skipped here with that reason."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from edgebuild import api
from edgebuild.errors import ExitCode
from edgebuild.fleet import jetson
from tests.conftest import edgebuild
from tests.integration.fleet.conftest import ok, state, tiny_project

pytestmark = pytest.mark.onnxruntime
pytest.importorskip("onnxruntime", reason="the tiny build's accuracy gate needs onnxruntime")

TARGET = "jetson-orin-nano"
RECIPE = f"""\
name: tiny-jetson
model: {{onnx: tiny.onnx}}
inputs: [{{name: x, shape: [1, 4]}}]
outputs: [y]
datasets:
  samples: {{kind: npz, path: samples.npz, labels: y}}
policy: {{unmeasurable: warn}}
targets:
  {TARGET}:
    gates:
      accuracy: {{dataset: samples, min_top1_agreement: 99}}
"""


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A layout with the tiny build for the Jetson published as 1.0.0 (no engine: this
    machine has no NVIDIA GPU, so the variant is the TensorRT-ready ONNX)."""
    project = tiny_project(tmp_path_factory.mktemp("jetson"), RECIPE)
    api.run(project / "tiny.yaml", api.RunOptions(out=project / "build",
                                                  cache_dir=project / "cache"))
    built = json.loads((project / "build" / "artifacts" / TARGET / "manifest.json").read_text())
    assert (built["format"], built["main"]) == ("tensorrt-onnx", "model.onnx")
    assert built["passed"], built["gates"]
    ok(edgebuild("publish", str(project / "build"), "--to",
                 f"oci-layout:{project / 'registry'}", "--version", "1.0.0"))
    return project / "registry"


@pytest.fixture
def promoted(release: Path, keys: dict[str, Path]) -> Path:
    ok(edgebuild("promote", f"oci-layout:{release}:1.0.0", "production",
                 "--key", str(keys["release"])))
    return release


def agent(registry: Path, root: Path, trusted: Path, *extra: str) -> Any:
    return edgebuild("agent", "--from", f"oci-layout:{registry}", "--channel", "production",
                     "--target", TARGET, "--root", str(root), "--trust", str(trusted),
                     "--once", *extra)


def nothing_active(root: Path, why: str) -> None:
    assert not (root / "current").exists()
    found = state(root)
    assert found["active"] is None and found["events"][-1]["action"] == "refused"
    assert why in found["events"][-1]["reason"], found["events"][-1]


@pytest.mark.slow
def test_a_device_without_tensorrt_refuses_the_jetson_variant(
        promoted: Path, keys: dict[str, Path], tmp_path: Path) -> None:
    facts = jetson.device_facts()
    if facts.tensorrt_version and facts.compute_capability:
        pytest.skip(f"this machine has TensorRT and an NVIDIA GPU ({facts})")
    root = tmp_path / "device"
    text = ok(agent(promoted, root, keys["trusted"]), ExitCode.STAGE_FAILED)
    assert "needs TensorRT on an NVIDIA GPU; this device has no" in text
    nothing_active(root, "needs TensorRT on an NVIDIA GPU")


@pytest.mark.slow
def test_an_orin_without_trtexec_cannot_build_the_engine_and_refuses(
        promoted: Path, keys: dict[str, Path], tmp_path: Path) -> None:
    if jetson.find_trtexec():
        pytest.skip("trtexec is installed here: the next test builds the engine")
    facts = tmp_path / "orin.json"
    facts.write_text(json.dumps({"tensorrt_version": "10.3.0.30", "compute_capability": "8.7"}))
    root = tmp_path / "device"
    text = ok(agent(promoted, root, keys["trusted"], "--device-facts", str(facts)),
              ExitCode.STAGE_FAILED)
    why = ("no engine shipped: building it from model.onnx on this device (TensorRT "
           "10.3.0.30, sm 8.7), but trtexec is not on PATH")
    assert why in text
    nothing_active(root, why)
    assert not list((root / "releases").iterdir())  # the staging folder is gone


@pytest.mark.slow
def test_the_device_builds_the_engine_with_trtexec(promoted: Path, keys: dict[str, Path],
                                                   tmp_path: Path) -> None:
    facts = jetson.device_facts()
    if not (facts.tensorrt_version and facts.compute_capability and jetson.find_trtexec()):
        pytest.skip("not measurable here: building an engine needs trtexec and TensorRT on "
                    f"an NVIDIA GPU ({facts.sources})")
    root = tmp_path / "device"
    ok(agent(promoted, root, keys["trusted"]))
    active = state(root)["active"]
    assert active["engine"].startswith("no engine shipped: building it from model.onnx")
    tag = json.loads((root / "current" / "engine" / "engine.json").read_text())
    assert (tag["tensorrt"], tag["compute_capability"]) == (
        facts.tensorrt_version, facts.compute_capability)
    assert (root / "current" / "engine" / "model.engine").stat().st_size > 0
