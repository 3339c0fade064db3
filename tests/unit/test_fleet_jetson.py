"""The Jetson rule's decision (edgebuild/fleet/jetson.py): a shipped TensorRT engine is
used only where its TensorRT version and compute capability are the device's, else it
is refused and the engine is built from the TensorRT-ready ONNX; the device's facts
from a file or the real sources' formats. The build itself needs trtexec on an NVIDIA
GPU: tests/integration/fleet/test_jetson.py (skipped here, with the reason)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import yaml

from edgebuild.core.manifest import ArtifactManifest, ManifestFile
from edgebuild.core.profile import TargetProfile
from edgebuild.errors import EdgebuildError
from edgebuild.fleet import jetson
from edgebuild.fleet.jetson import DeviceFacts, decide

REPO = Path(__file__).resolve().parents[2]
KEY = "0" * 64
PROFILES = {"image": {"min": [1, 3, 224, 224], "opt": [4, 3, 224, 224],
                      "max": [8, 3, 224, 224]}}


def variant(folder: Path, fmt: str, files: dict[str, bytes],
            backend: str = "tensorrt") -> ArtifactManifest:
    """A variant's manifest over real files written to `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (folder / name).write_bytes(data)
    profile = TargetProfile.model_validate(
        yaml.safe_load((REPO / "targets" / "jetson-orin-nano.yaml").read_text()))
    main = jetson.ENGINE if fmt == jetson.ENGINE_FORMAT else jetson.ONNX
    return ArtifactManifest(
        edgebuild_version="0", created="2026-11-27T00:00:00Z", recipe="r",
        target="jetson-orin-nano", profile=profile, backend=backend, backend_version=2,
        tools={}, precision="fp16", builds_on_device=True, stage="compile", stage_key=KEY,
        format=fmt, main=main, runner_metadata={"profiles": PROFILES}, passed=True,
        files=[ManifestFile(name=n, sha256=hashlib.sha256(d).hexdigest(), size=len(d))
               for n, d in files.items()])


def engine_files(tensorrt: str = "10.3.0.30", sm: str = "8.7",
                 onnx: bool = True) -> dict[str, bytes]:
    """What build_on_device ships (backends/tensorrt/backend.py): the engine, its tag
    and the ONNX it was built from. The engine's bytes are never read by the decision."""
    files = {jetson.ENGINE: b"engine bytes are not read by the decision",
             jetson.TAG: json.dumps({"tensorrt": tensorrt, "compute_capability": sm}).encode()}
    if onnx:
        files[jetson.ONNX] = b"onnx"
    return files


ORIN = DeviceFacts(tensorrt_version="10.3.0.30", compute_capability="8.7")


def test_a_matching_engine_is_used(tmp_path: Path) -> None:
    decision = decide(variant(tmp_path, jetson.ENGINE_FORMAT, engine_files()), tmp_path, ORIN)
    assert decision.action == "use-shipped", decision.reason
    assert "matches this device (TensorRT 10.3.0.30, sm 8.7)" in decision.reason


@pytest.mark.parametrize(("facts", "why"), [
    (DeviceFacts(tensorrt_version="10.7.0.23", compute_capability="8.7"), "TensorRT 10.7.0.23"),
    (DeviceFacts(tensorrt_version="10.3.0.26", compute_capability="8.7"), "TensorRT 10.3.0.26"),
    (DeviceFacts(tensorrt_version="10.3.0.30", compute_capability="7.2"), "sm 7.2"),
])
def test_an_engine_for_another_tensorrt_or_gpu_is_refused_and_built_from_the_onnx(
        tmp_path: Path, facts: DeviceFacts, why: str) -> None:
    decision = decide(variant(tmp_path, jetson.ENGINE_FORMAT, engine_files()), tmp_path, facts)
    assert decision.action == "build"
    assert decision.reason.startswith("shipped engine refused: built for TensorRT "
                                      "10.3.0.30, sm 8.7; this device has")
    assert why in decision.reason and "building it from model.onnx" in decision.reason


def test_without_its_tag_an_engine_is_judged_by_the_profile_it_was_built_for(
        tmp_path: Path) -> None:
    files = engine_files()
    del files[jetson.TAG]
    manifest = variant(tmp_path, jetson.ENGINE_FORMAT, files)
    # The profile declares TensorRT 10.3 (major.minor): any 10.3.x on sm 8.7 matches.
    assert decide(manifest, tmp_path, DeviceFacts(tensorrt_version="10.3.0.26",
                                                  compute_capability="8.7")).action == \
        "use-shipped"
    assert decide(manifest, tmp_path, DeviceFacts(tensorrt_version="10.4.0",
                                                  compute_capability="8.7")).action == "build"


def test_a_mismatched_engine_without_an_onnx_is_refused(tmp_path: Path) -> None:
    manifest = variant(tmp_path, jetson.ENGINE_FORMAT, engine_files(onnx=False))
    decision = decide(manifest, tmp_path, DeviceFacts(tensorrt_version="10.7.0",
                                                      compute_capability="8.7"))
    assert decision.action == "refuse"
    assert "has no model.onnx to build it from" in decision.reason


def test_the_tensorrt_ready_onnx_is_built_on_the_device(tmp_path: Path) -> None:
    manifest = variant(tmp_path, "tensorrt-onnx", {jetson.ONNX: b"onnx"})
    decision = decide(manifest, tmp_path, ORIN)
    assert decision.action == "build"
    assert decision.reason == ("no engine shipped: building it from model.onnx on this "
                               "device (TensorRT 10.3.0.30, sm 8.7)")


def test_a_device_without_tensorrt_or_gpu_refuses_the_variant(tmp_path: Path) -> None:
    manifest = variant(tmp_path, jetson.ENGINE_FORMAT, engine_files())
    facts = DeviceFacts(sources={"tensorrt_version": "no tensorrt package",
                                 "compute_capability": "no NVIDIA driver here"})
    decision = decide(manifest, tmp_path, facts)
    assert decision.action == "refuse"
    assert decision.reason.endswith("this device has no TensorRT (no tensorrt package) and "
                                    "no NVIDIA GPU (no NVIDIA driver here)")


def test_other_backends_are_not_concerned(tmp_path: Path) -> None:
    manifest = variant(tmp_path, "onnx", {jetson.ONNX: b"onnx"}, backend="onnxruntime")
    assert decide(manifest, tmp_path, DeviceFacts()).action == "not-tensorrt"


def test_device_facts_from_a_file_or_the_environment(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "facts.json"
    path.write_text('{"tensorrt_version": "10.3.0.30", "compute_capability": "8.7"}')
    facts = jetson.device_facts(path)
    assert (facts.tensorrt_version, facts.compute_capability) == ("10.3.0.30", "8.7")
    assert facts.sources["tensorrt_version"] == f"from {path}"
    monkeypatch.setenv(jetson.FACTS_ENV, str(path))
    assert jetson.device_facts().compute_capability == "8.7"
    path.write_text('{"tensorrt_version": "ten", "compute_capability": "8.7"}')
    with pytest.raises(EdgebuildError, match="key tensorrt_version"):
        jetson.device_facts(path)


def test_this_machine_has_no_tensorrt_and_says_where_it_looked(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(jetson.FACTS_ENV, raising=False)
    facts = jetson.device_facts()
    if facts.tensorrt_version is not None or facts.compute_capability is not None:
        pytest.skip(f"this machine has TensorRT or an NVIDIA GPU: {facts}")
    assert facts.sources["compute_capability"]  # libcuda's "no NVIDIA driver", …
    assert facts.sources["tensorrt_version"]


def test_the_real_sources_formats() -> None:
    assert jetson.version_prefix("10.3.0.30-1+cuda12.5") == "10.3.0.30"  # dpkg-query
    assert jetson.version_prefix("10.7.0.post1") == "10.7.0"  # tensorrt.__version__
    assert jetson.version_prefix("") is None
    header = ("#define TRT_MAJOR_ENTERPRISE 10\n#define TRT_MINOR_ENTERPRISE 3\n"
              "#define TRT_PATCH_ENTERPRISE 0\n#define NV_TENSORRT_MAJOR TRT_MAJOR_ENTERPRISE\n"
              "#define NV_TENSORRT_MINOR TRT_MINOR_ENTERPRISE\n"
              "#define NV_TENSORRT_PATCH TRT_PATCH_ENTERPRISE\n")
    assert jetson.header_version(header) == "10.3.0"  # TensorRT 10's NvInferVersion.h
    assert jetson.header_version("#define NV_TENSORRT_MAJOR 8\n#define NV_TENSORRT_MINOR 5\n"
                                 "#define NV_TENSORRT_PATCH 2\n") == "8.5.2"  # JetPack 5
    # An Orin Nano developer kit's /proc/device-tree/compatible:
    assert jetson.tegra_sm(b"nvidia,p3768-0000+p3767-0005\0nvidia,p3767-0005\0"
                           b"nvidia,tegra234\0") == "8.7"
    assert jetson.tegra_sm(b"nvidia,p3449-0000-b00+p3448-0002-b00\0nvidia,jetson-nano\0"
                           b"nvidia,tegra210\0") == "5.3"
    assert jetson.tegra_sm(b"raspberrypi,5-model-b\0brcm,bcm2712\0") is None


def test_the_build_uses_compiles_trtexec_line(tmp_path: Path) -> None:
    manifest = variant(tmp_path, "tensorrt-onnx", {jetson.ONNX: b"onnx"})
    onnx = tmp_path / "files" / "model.onnx"
    command = jetson.build_command(manifest, onnx, "/usr/src/tensorrt/bin/trtexec")
    assert command[:3] == ["/usr/src/tensorrt/bin/trtexec", f"--onnx={onnx}",
                           "--saveEngine=model.engine"]
    assert "--stronglyTyped" in command and "--memPoolSize=workspace:1024M" in command
    assert "--optShapes=image:4x3x224x224" in command


def test_an_engine_this_device_built_is_recognised(tmp_path: Path) -> None:
    """A kept release (a rollback to it) keeps the engine built for it, not rebuilt."""
    engine = tmp_path / jetson.ENGINE_DIR
    engine.mkdir()
    (engine / jetson.TAG).write_text(json.dumps({"tensorrt": "10.3.0.30",
                                                 "compute_capability": "8.7"}))
    assert not jetson.built_here(tmp_path, ORIN)  # the tag without its engine
    (engine / jetson.ENGINE).write_bytes(b"built by trtexec")
    assert jetson.built_here(tmp_path, ORIN)
    assert not jetson.built_here(tmp_path, DeviceFacts(tensorrt_version="10.7.0",
                                                       compute_capability="8.7"))
