"""build → publish → promote → agent, on a real build of the tiny ONNX project (issue 33).

One build of three targets (two pass their gates, one fails its size gate) is
published to an OCI image layout; agents for the two passing targets pick their own
variant. Every attack the agent must refuse — a tampered blob, an unsigned channel, a
statement signed by an unknown key, a replayed older statement, an expired one, a
layer name that leaves its folder — leaves nothing activated; a failing health check
rolls back to the previous release.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from edgebuild.core.digest import digest_file
from edgebuild.core.manifest import read_manifest
from edgebuild.errors import ExitCode
from edgebuild.fleet.layout import Layout
from edgebuild.fleet.promote import promote, referrers_tag
from edgebuild.fleet.records import (
    INDEX,
    MANIFEST,
    REF_NAME,
    STATEMENT_LAYER,
    TARGET,
    TITLE,
    ImageIndex,
    canonical,
)
from edgebuild.fleet.statement import parse
from tests.conftest import edgebuild
from tests.integration.fleet.conftest import active_target, ok, state

pytestmark = pytest.mark.onnxruntime
pytest.importorskip("onnxruntime", reason="the tiny build and the model check need onnxruntime")


@pytest.fixture
def registry(build: Path, tmp_path: Path) -> Path:
    folder = tmp_path / "registry"
    ok(edgebuild("publish", str(build), "--to", f"oci-layout:{folder}", "--version", "1.0.0"))
    return folder


def agent(registry: Path, root: Path, trusted: Path, target: str = "host-cpu",
          *extra: str) -> Any:
    return edgebuild("agent", "--from", f"oci-layout:{registry}", "--channel", "production",
                     "--target", target, "--root", str(root), "--trust", str(trusted),
                     "--once", *extra)


@pytest.mark.slow
def test_publish_writes_one_manifest_per_passing_target_and_is_idempotent(
        build: Path, registry: Path) -> None:
    layout = Layout(registry)
    assert json.loads((registry / "oci-layout").read_text()) == {"imageLayoutVersion": "1.0.0"}
    release = layout.resolve("1.0.0")
    assert release.media_type == INDEX and release.annotation(REF_NAME) == "1.0.0"
    index = layout.image_index(release)
    assert {d.annotation(TARGET) for d in index.manifests} == {"host-cpu", "edge-box"}
    for descriptor in index.manifests:
        target = descriptor.annotation(TARGET)
        manifest = layout.manifest(descriptor)
        built = read_manifest(build / "artifacts" / str(target) / "manifest.json")
        assert manifest.artifact_type == "application/vnd.edgebuild.model.v1"
        notes = manifest.annotations or {}
        assert notes["dev.edgebuild.backend"] == "onnxruntime"
        assert notes["dev.edgebuild.stage-key"] == built.stage_key
        assert notes["org.opencontainers.image.version"] == "1.0.0"
        assert notes["org.opencontainers.image.created"] == built.created
        assert "dev.edgebuild.gate.accuracy.top1_agreement" in notes
        files = {layer.annotation(TITLE): layer for layer in manifest.layers}
        assert set(files) == {f.name for f in built.files} | {"manifest.json", "report.json"}
        for entry in built.files:  # each file layer is the file the build recorded
            assert files[entry.name].digest == f"sha256:{entry.sha256}"
            assert digest_file(layout.blob_path(files[entry.name].digest)) == entry.sha256
    selectors = {d.annotation(TARGET): d.annotations or {} for d in index.manifests}
    assert float(selectors["host-cpu"]["dev.edgebuild.p50-ms"]) > 0  # latency-gated target
    assert "dev.edgebuild.p50-ms" not in selectors["edge-box"]
    blobs = sorted(p.name for p in (registry / "blobs" / "sha256").iterdir())
    again = ok(edgebuild("publish", str(build), "--to", f"oci-layout:{registry}",
                         "--version", "1.0.0"))
    assert "0 new blob(s)" in again and release.digest in again
    assert sorted(p.name for p in (registry / "blobs" / "sha256").iterdir()) == blobs
    # A released version is never moved to other content (here: with the failed target).
    moved = edgebuild("publish", str(build), "--to", f"oci-layout:{registry}", "--version",
                      "1.0.0", "--allow-failed")
    assert "already published with other content" in ok(moved, ExitCode.USAGE)
    assert layout.resolve("1.0.0").digest == release.digest
    # --allow-failed publishes the failed target, marked.
    ok(edgebuild("publish", str(build), "--to", f"oci-layout:{registry}", "--version",
                 "1.0.0-all", "--allow-failed"))
    marked = {d.annotation(TARGET): d.annotation("dev.edgebuild.gates.passed")
              for d in layout.image_index(layout.resolve("1.0.0-all")).manifests}
    assert marked == {"host-cpu": "true", "edge-box": "true", "too-big": "false"}


def test_agents_select_and_activate_their_own_variant(registry: Path, keys: dict[str, Path],
                                                      tmp_path: Path) -> None:
    text = ok(edgebuild("promote", f"oci-layout:{registry}:1.0.0", "production",
                        "--key", str(keys["release"])))
    assert re.search(r"sequence \d{13}", text), text  # the issue time, in ms (promote.py)
    layout = Layout(registry)
    statement = layout.resolve("production")
    assert statement.artifact_type == "application/vnd.edgebuild.channel-statement.v1"
    release = layout.resolve("1.0.0")
    referrers = layout.image_index(layout.resolve(referrers_tag(release.digest)))
    assert [d.digest for d in referrers.manifests] == [statement.digest]
    for target in ("host-cpu", "edge-box"):
        root = tmp_path / target
        text = ok(agent(registry, root, keys["trusted"], target))
        assert "1.0.0 activated (sequence " in text and "ran one inference" in text, text
        assert active_target(root) == target
        assert (root / "current").is_symlink()
        assert state(root)["active"]["version"] == "1.0.0"
        assert "up to date" in ok(agent(registry, root, keys["trusted"], target))
    missing = agent(registry, tmp_path / "none", keys["trusted"], "too-big")
    assert "0 variants for target 'too-big'" in ok(missing, ExitCode.STAGE_FAILED)
    assert not (tmp_path / "none" / "current").exists()


@pytest.fixture
def device(registry: Path, keys: dict[str, Path], tmp_path: Path) -> Iterator[Path]:
    """A device with release 1.0.0 active."""
    ok(edgebuild("promote", f"oci-layout:{registry}:1.0.0", "production",
                 "--key", str(keys["release"])))
    root = tmp_path / "device"
    ok(agent(registry, root, keys["trusted"]))
    yield root


def refused(registry: Path, root: Path, trusted: Path, why: str) -> None:
    """The agent refuses with `why`, and the active release stays what it was."""
    before = (root / "current").resolve() if (root / "current").exists() else None
    active = state(root)["active"] if (root / "state.json").exists() else None
    text = ok(agent(registry, root, trusted), ExitCode.STAGE_FAILED)
    assert why in text, text
    after = (root / "current").resolve() if (root / "current").exists() else None
    assert after == before and state(root)["active"] == active
    assert state(root)["events"][-1]["action"] == "refused"


@pytest.mark.slow
def test_a_tampered_blob_is_refused(build: Path, registry: Path, keys: dict[str, Path],
                                    tmp_path: Path) -> None:
    ok(edgebuild("promote", f"oci-layout:{registry}:1.0.0", "production",
                 "--key", str(keys["release"])))
    model = read_manifest(build / "artifacts" / "host-cpu" / "manifest.json").files[0]
    blob = registry / "blobs" / "sha256" / model.sha256
    data = bytearray(blob.read_bytes())
    data[len(data) // 2] ^= 0x01
    blob.write_bytes(bytes(data))
    root = tmp_path / "fresh"
    refused(registry, root, keys["trusted"], "does not match its digest and size")
    assert not (root / "current").exists()
    assert [p.name for p in (root / "releases").iterdir()] == []  # no partial staging left


def test_an_unsigned_channel_is_refused(registry: Path, device: Path,
                                        keys: dict[str, Path]) -> None:
    layout = Layout(registry)
    good = layout.resolve("production")
    layout.tag("production", layout.resolve("1.0.0"))  # the tag moved without a statement
    refused(registry, device, keys["trusted"], "names no signed statement")
    layout.tag("production", good)
    # A statement artifact whose signature was stripped (its sequence raised: unsigned,
    # anyone could write it).
    promote(Layout(registry), "1.0.0", "production", keys["release"], 30)
    tagged = layout.resolve("production")
    manifest = layout.manifest(tagged)
    signed = parse(layout.read_blob(manifest.layers[0]), "test")
    forged = signed.model_copy(update={"signature": None, "statement": signed.statement
                                       .model_copy(update={"sequence": 99})})
    blob = layout.put(STATEMENT_LAYER, canonical(forged.model_dump(mode="json")))
    stripped = layout.put_json(MANIFEST, manifest.model_copy(update={"layers": [blob]}))
    layout.tag("production", stripped.model_copy(update={
        "artifact_type": tagged.artifact_type}))
    refused(registry, device, keys["trusted"], "it is unsigned")


def test_a_statement_by_an_unknown_key_is_refused(registry: Path, device: Path,
                                                  keys: dict[str, Path]) -> None:
    ok(edgebuild("promote", f"oci-layout:{registry}:1.0.0", "production",
                 "--key", str(keys["stranger"])))
    refused(registry, device, keys["trusted"], "is not a trusted key")


def test_a_replayed_older_statement_is_refused(registry: Path, device: Path,
                                               keys: dict[str, Path]) -> None:
    layout = Layout(registry)
    old = layout.resolve("production")  # what the device acts on
    first = state(device)["sequence"]
    ok(edgebuild("promote", f"oci-layout:{registry}:1.0.0", "production",
                 "--key", str(keys["release"])))
    assert "renewed by sequence" in ok(agent(registry, device, keys["trusted"]))
    second = state(device)["sequence"]
    assert second > first
    layout.tag("production", old)  # an attacker serves the older signed statement
    refused(registry, device, keys["trusted"],
            f"(sequence {first}, 1.0.0, issued ")
    refused(registry, device, keys["trusted"], f"is older than sequence {second}, the one "
            "this device acted on: a rewound channel tag, a downgrade or a replay")


def test_an_expired_statement_is_refused(registry: Path, keys: dict[str, Path],
                                         tmp_path: Path) -> None:
    promote(Layout(registry), "1.0.0", "production", keys["release"], 30,
            now=dt.datetime(2020, 1, 1, tzinfo=dt.UTC))
    root = tmp_path / "fresh"
    refused(registry, root, keys["trusted"], "the statement expired at 2020-01-31")
    assert not (root / "current").exists()


def test_a_layer_name_leaving_its_folder_is_refused(registry: Path, keys: dict[str, Path],
                                                    tmp_path: Path) -> None:
    """A signed release whose layer title is `../…` (a compromised publisher): refused
    before a byte is written outside the release folder."""
    layout = Layout(registry)
    index = layout.image_index(layout.resolve("1.0.0"))
    host = next(d for d in index.manifests if d.annotation(TARGET) == "host-cpu")
    manifest = layout.manifest(host)
    layers = [layer.model_copy(update={"annotations": {TITLE: "../../escaped"}})
              if layer.media_type == "application/vnd.edgebuild.model.file.v1" else layer
              for layer in manifest.layers]
    evil = layout.put_json(MANIFEST, manifest.model_copy(update={"layers": layers}))
    evil = evil.model_copy(update={"annotations": host.annotations})
    release = layout.put_json(INDEX, ImageIndex(manifests=[evil]))
    layout.tag("evil", release)
    promote(Layout(registry), "evil", "production", keys["release"], 1)
    root = tmp_path / "fresh"
    refused(registry, root, keys["trusted"], "not a plain relative path")
    assert not (tmp_path / "escaped").exists() and not (root / "escaped").exists()


@pytest.mark.slow
def test_a_failing_health_check_rolls_back(build: Path, registry: Path, device: Path,
                                           keys: dict[str, Path]) -> None:
    first = (device / "current").resolve()
    # Release 2.0.0: the same build, so its model file is reused, not downloaded again.
    ok(edgebuild("publish", str(build), "--to", f"oci-layout:{registry}", "--version",
                 "2.0.0"))
    ok(edgebuild("promote", f"oci-layout:{registry}:2.0.0", "production",
                 "--key", str(keys["release"])))
    check = "sh -c 'test \"$EDGEBUILD_RELEASE_VERSION\" != 2.0.0'"
    text = ok(agent(registry, device, keys["trusted"], "host-cpu", "--health-cmd", check),
              ExitCode.GATE_FAILED)
    assert "2.0.0 failed its health check (--health-cmd exited 1); rolled back to 1.0.0" \
        in text
    assert (device / "current").resolve() == first
    now = state(device)
    assert now["active"]["version"] == "1.0.0" and now["sequence"] == \
        now["events"][-1]["sequence"] > now["active"]["sequence"]
    assert now["events"][-1]["action"] == "rolled-back"
    # Not retried until promoted again; the rollback promotion is a newer sequence.
    assert "waiting for a newer promotion" in ok(
        agent(registry, device, keys["trusted"], "host-cpu", "--health-cmd", check),
        ExitCode.GATE_FAILED)
    ok(edgebuild("promote", f"oci-layout:{registry}:1.0.0", "production",
                 "--key", str(keys["release"])))
    assert "1.0.0 renewed by sequence" in ok(agent(registry, device, keys["trusted"]))
    # A healthy 2.0.0 reuses the model file the device has.
    ok(edgebuild("promote", f"oci-layout:{registry}:2.0.0", "production",
                 "--key", str(keys["release"])))
    ok(agent(registry, device, keys["trusted"]))
    now = state(device)
    model = read_manifest(build / "artifacts" / "host-cpu" / "manifest.json").files[0]
    assert now["active"]["version"] == "2.0.0" and now["previous"]["version"] == "1.0.0"
    assert now["active"]["reused_bytes"] == model.size


@pytest.mark.slow
def test_the_agent_keeps_the_last_releases(build: Path, registry: Path,
                                           keys: dict[str, Path], tmp_path: Path) -> None:
    root = tmp_path / "device"
    for version in ("1.0.0", "1.1.0", "1.2.0", "1.3.0"):
        if version != "1.0.0":
            ok(edgebuild("publish", str(build), "--to", f"oci-layout:{registry}",
                         "--version", version))
        ok(edgebuild("promote", f"oci-layout:{registry}:{version}", "production",
                     "--key", str(keys["release"])))
        ok(agent(registry, root, keys["trusted"], "host-cpu", "--keep", "2",
                 "--no-model-check"))
    now = state(root)
    assert now["active"]["version"] == "1.3.0" and now["previous"]["version"] == "1.2.0"
    on_disk = sorted(p.name for p in (root / "releases").iterdir())
    assert on_disk == sorted([now["active"]["folder"], now["previous"]["folder"]])
    shutil.rmtree(root)


def test_the_model_check_is_skipped_with_its_reason_where_it_cannot_run(
        registry: Path, device: Path, tmp_path: Path) -> None:
    """A release for another architecture: the default check says why it could not run
    the model (exit 75), never that the model is healthy."""
    import platform
    import subprocess
    import sys

    arch = "aarch64" if platform.machine() != "aarch64" else "x86_64"
    other = tmp_path / "foreign-release"
    shutil.copytree(device / "current", other)
    manifest = json.loads((other / "manifest.json").read_text())
    manifest["profile"]["device"]["arch"] = arch
    (other / "manifest.json").write_text(json.dumps(manifest))
    done = subprocess.run([sys.executable, "-m", "edgebuild.fleet.health", str(other)],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 75, done.stdout + done.stderr
    assert f"cannot run here: not measurable here: needs {arch}" in done.stdout
    done = subprocess.run([sys.executable, "-m", "edgebuild.fleet.health",
                           str(device / "current")], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0 and "ran one inference (y [1, 3])" in done.stdout
