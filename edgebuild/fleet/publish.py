"""`edgebuild publish BUILD --to oci-layout:DIR --version V`: a build as OCI artifacts.

    index (tag V, artifactType model)          one per release
      ├─ manifest  host-cpu   annotations: target, backend, precision, device, p50…
      │    config  application/vnd.oci.empty.v1+json
      │    layers  model.onnx …          (the target's files, digests from its manifest)
      │            manifest.json         (core/manifest.py: how it was built and judged)
      │            report.json slice     (the target's entry of the run's report)
      └─ manifest  jetson-…

Only targets whose gates passed are published (`--allow-failed` publishes the others
too, annotated `dev.edgebuild.gates.passed=false`). Everything is deterministic (sorted
JSON, the build's own time as `created`), so publishing a build twice yields the same
digests, and a target that did not change keeps its blobs: a device downloads only
what changed. A version tag is never moved to other content.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from edgebuild import __version__
from edgebuild.core.manifest import (
    MANIFEST_NAME,
    MEDIA_TYPE,
    ArtifactManifest,
    read_manifest,
    verified_files,
)
from edgebuild.errors import EdgebuildError
from edgebuild.fleet.layout import Store
from edgebuild.fleet.records import (
    CREATED,
    EMPTY,
    EMPTY_CONFIG,
    EMPTY_DATA,
    FILE_LAYER,
    INDEX,
    MANIFEST,
    MODEL_ARTIFACT,
    PASSED,
    REF_NAME,
    REPORT_LAYER,
    TARGET,
    TITLE,
    VERSION,
    Descriptor,
    ImageIndex,
    ImageManifest,
    canonical,
)

PREFIX = "dev.edgebuild."
# What the index repeats of each manifest's annotations: enough to pick a variant
# without fetching every manifest.
SELECTORS = (TARGET, f"{PREFIX}backend", f"{PREFIX}precision", f"{PREFIX}device",
             f"{PREFIX}device.arch", PASSED)


class Published(BaseModel):
    """What `publish` did: the release index and each target's manifest."""

    model_config = ConfigDict(frozen=True)
    version: str
    index: Descriptor
    targets: dict[str, Descriptor]
    skipped: dict[str, str]  # target -> why it was not published
    new_blobs: int


def target_folders(build: Path) -> list[Path]:
    """build/artifacts/<target>/ folders (not the hidden staging ones) with a manifest."""
    artifacts = build / "artifacts"
    if not artifacts.is_dir():
        raise EdgebuildError(f"{build} has no artifacts/ folder: not a build directory",
                             "publish the --out folder of `edgebuild run` "
                             "(default build/<recipe>)")
    return sorted(p for p in artifacts.iterdir()
                  if p.is_dir() and not p.name.startswith(".") and
                  (p / MANIFEST_NAME).is_file())


def annotations_of(manifest: ArtifactManifest, version: str) -> dict[str, str]:
    """The target's figures as annotations: strings, as the spec requires."""
    profile = manifest.profile
    found = {
        TARGET: manifest.target, f"{PREFIX}recipe": manifest.recipe,
        f"{PREFIX}backend": manifest.backend,
        f"{PREFIX}backend.version": str(manifest.backend_version),
        f"{PREFIX}precision": manifest.precision, f"{PREFIX}format": manifest.format,
        f"{PREFIX}main": manifest.main, f"{PREFIX}device": profile.device.name,
        f"{PREFIX}device.kind": profile.device.kind,
        f"{PREFIX}device.arch": profile.device.arch, f"{PREFIX}device.os": profile.device.os,
        f"{PREFIX}profile": profile.name, f"{PREFIX}stage": manifest.stage,
        f"{PREFIX}stage-key": manifest.stage_key,
        f"{PREFIX}builds-on-device": str(manifest.builds_on_device).lower(),
        f"{PREFIX}version": manifest.edgebuild_version,
        f"{PREFIX}publisher.version": __version__,
        PASSED: str(manifest.passed).lower(), VERSION: version, CREATED: manifest.created,
        TITLE: f"{manifest.recipe}/{manifest.target}",
    }
    if manifest.candidate:
        found[f"{PREFIX}candidate"] = manifest.candidate
    for tool, installed in manifest.tools.items():
        found[f"{PREFIX}tool.{tool}"] = installed
    for key in ("soc_model", "htp_arch", "compute_capability", "tensorrt_version"):  # QNN, TRT
        if key in profile.options:
            found[f"{PREFIX}option.{key}"] = str(profile.options[key])
    for gate in manifest.gates:
        found[f"{PREFIX}gate.{gate.gate}"] = gate.status
        for key, value in gate.measured.items():
            found[f"{PREFIX}gate.{gate.gate}.{key}"] = f"{value:.6g}"
        if gate.gate == "latency" and "p50" in gate.measured:
            found[f"{PREFIX}p50-ms"] = f"{gate.measured['p50']:.6g}"
    return found


def report_slice(build: Path, target: str) -> bytes | None:
    """The target's entry of build/report.json (canonical JSON), when there is one."""
    path = build / "report.json"
    try:
        report = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    entries = [t for t in report.get("targets", []) if isinstance(t, dict)
               and t.get("name") == target] if isinstance(report, dict) else []
    return canonical(entries[0]) if entries else None


def publish_target(layout: Store, folder: Path, manifest: ArtifactManifest, version: str,
                   build: Path) -> Descriptor:
    """One target's image manifest (its layers stored first); its descriptor."""
    files = verified_files(folder, manifest)  # re-verified: changed since the build = refused
    layers = [layout.put_file(FILE_LAYER, files[f.name], f.sha256, f.size, {TITLE: f.name})
              for f in manifest.files]
    layers.append(layout.put(MEDIA_TYPE, (folder / MANIFEST_NAME).read_bytes(),
                             {TITLE: MANIFEST_NAME}))
    sliced = report_slice(build, manifest.target)
    if sliced is not None:
        layers.append(layout.put(REPORT_LAYER, sliced, {TITLE: "report.json"}))
    layout.put(EMPTY, EMPTY_DATA)
    notes = annotations_of(manifest, version)
    record = ImageManifest(artifact_type=MODEL_ARTIFACT, config=EMPTY_CONFIG, layers=layers,
                           annotations=notes)
    described = layout.put_json(MANIFEST, record)
    return described.model_copy(update={"annotations": {
        k: notes[k] for k in (*SELECTORS, f"{PREFIX}p50-ms") if k in notes}})


def publish(build: Path, layout: Store, version: str, allow_failed: bool = False) -> Published:
    """Publish every target of the build at `build` to `layout` (a folder or registry)."""
    if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}", version) or \
            version.startswith("sha256-"):
        raise EdgebuildError(f"--version {version!r}: not an OCI tag",
                             "letters, digits and . _ - (not first: . -), at most 128 "
                             "characters; sha256-… is the referrers tags'")
    layout.init()
    targets: dict[str, Descriptor] = {}
    skipped: dict[str, str] = {}
    created: list[str] = []
    recipes: set[str] = set()
    for folder in target_folders(build):
        manifest = read_manifest(folder / MANIFEST_NAME)
        if not manifest.passed and not allow_failed:
            failed = [g.gate for g in manifest.gates if not g.passed]
            skipped[manifest.target] = f"gates failed: {', '.join(failed)}"
            continue
        targets[manifest.target] = publish_target(layout, folder, manifest, version, build)
        created.append(manifest.created)
        recipes.add(manifest.recipe)
    if not targets:
        why = "; ".join(f"{t}: {r}" for t, r in skipped.items()) or "no target was built"
        raise EdgebuildError(f"{build}: nothing to publish ({why})",
                             "fix the gates, or publish anyway with --allow-failed "
                             "(the manifests say so)")
    notes = {VERSION: version, CREATED: max(created), f"{PREFIX}recipe": ",".join(
        sorted(recipes)), f"{PREFIX}publisher.version": __version__}
    index = ImageIndex(artifact_type=MODEL_ARTIFACT, annotations=notes,
                       manifests=[targets[t] for t in sorted(targets)])
    described = layout.put_json(INDEX, index)
    tagged = layout.lookup(version)
    if tagged is not None and tagged.digest != described.digest:
        raise EdgebuildError(f"{layout.where}: version {version} is already published with "
                             f"other content ({tagged.digest})",
                             "a release is immutable: publish under a new --version")
    layout.tag(version, described.model_copy(update={"annotations": {
        VERSION: version, CREATED: max(created)}}))
    return Published(version=version, index=described, targets=targets, skipped=skipped,
                     new_blobs=layout.written)


__all__ = ["REF_NAME", "Published", "publish"]
