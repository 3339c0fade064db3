"""The agent's download: a signed release's variant for this target, every layer copied
through its sha256 and size into releases/.staging-…, checked against the artifact's own
manifest, then renamed to releases/<manifest hex>. A file a kept release already has is
copied from there (verified again); a TensorRT variant's engine follows the Jetson rule
(jetson.py). Anything that does not verify raises `Refused` before anything moves."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

from edgebuild.core.manifest import (
    MANIFEST_NAME,
    MEDIA_TYPE,
    ArtifactManifest,
    read_manifest,
    verified_files,
)
from edgebuild.core.paths import confined
from edgebuild.errors import EdgebuildError
from edgebuild.fleet.agent_options import AgentOptions, Refused
from edgebuild.fleet.layout import BlobError, Store, copy_verified
from edgebuild.fleet.records import (
    FILE_LAYER,
    INDEX,
    MANIFEST,
    MODEL_ARTIFACT,
    REPORT_LAYER,
    TARGET,
    TITLE,
    Descriptor,
    ImageManifest,
)
from edgebuild.fleet.state import RELEASE_NAME, AgentState, Release, write_atomic
from edgebuild.fleet.statement import SignedStatement


def stage(layout: Store, signed: SignedStatement, options: AgentOptions,
           state: AgentState) -> Release:
    """Download the target's variant into releases/<manifest hex>/, verified."""
    statement = signed.statement
    try:
        release = layout.image_index(Descriptor(media_type=INDEX, digest=statement.index,
                                                size=statement.index_size))
        variants = [d for d in release.manifests if d.annotation(TARGET) == options.target]
        if len(variants) != 1:
            known = sorted({d.annotation(TARGET) or "?" for d in release.manifests})
            raise Refused(f"release {statement.version} has {len(variants)} variants for "
                          f"target {options.target!r}", f"its targets: {', '.join(known)}")
        variant = variants[0]
        if variant.media_type != MANIFEST:
            raise Refused(f"the variant of {options.target} is a {variant.media_type}")
        manifest = layout.manifest(variant)
        if manifest.artifact_type != MODEL_ARTIFACT:
            raise Refused(f"the variant of {options.target} is a {manifest.artifact_type}, "
                          "not an edgebuild model")
        return _download(layout, manifest, variant, signed, options)
    except Refused:
        raise
    except EdgebuildError as exc:  # BlobError, a confined name, a malformed record
        raise Refused(exc.message, exc.hint) from None


def _download(layout: Store, manifest: ImageManifest, variant: Descriptor,
              signed: SignedStatement, options: AgentOptions) -> Release:
    root = options.root
    final = root / "releases" / variant.hex
    staging = root / "releases" / f".staging-{uuid.uuid4().hex[:12]}"
    reuse = _local_files(root)
    downloaded = reused = 0
    try:
        for layer in manifest.layers:
            title = layer.annotation(TITLE)
            if title is None:
                raise Refused(f"a layer ({layer.digest}) has no title")
            if layer.media_type == FILE_LAYER:
                target = confined(staging / "files", title, "a layer title")
            elif layer.media_type in (MEDIA_TYPE, REPORT_LAYER):
                target = staging / (MANIFEST_NAME if layer.media_type == MEDIA_TYPE
                                    else "report.json")
            else:
                continue  # a layer this agent does not use
            local = reuse.get(layer.hex)
            if local is not None:
                with local.open("rb") as source:
                    reused += copy_verified(source, target, layer, f"{local}")
            else:
                partial = root / "downloads" / f"{layer.hex}.part"  # kept: resumed
                downloaded += layout.copy_blob(layer, target, partial)
        built = read_manifest(staging / MANIFEST_NAME)
        verified_files(staging / "files", built)  # the artifact's own record agrees
        titles = {layer.annotation(TITLE) for layer in manifest.layers
                  if layer.media_type == FILE_LAYER}
        if titles != {f.name for f in built.files}:
            raise Refused("the variant's file layers are not the files its manifest lists")
        if built.target != options.target:
            raise Refused(f"the variant's manifest is for target {built.target!r}")
        engine = _engine(staging, final, built, options)
        statement = signed.statement
        release = Release(version=statement.version, channel=statement.channel,
                          sequence=statement.sequence, index=statement.index,
                          manifest=variant.digest, folder=variant.hex, target=built.target,
                          backend=built.backend, main=built.main,
                          downloaded_bytes=downloaded, reused_bytes=reused, engine=engine)
        write_atomic(staging / RELEASE_NAME, release.model_dump_json(indent=2) + "\n")
        if final.exists():  # kept from before (a rollback): the same content, by digest
            try:
                verified_files(final / "files", read_manifest(final / MANIFEST_NAME))
                write_atomic(final / RELEASE_NAME, release.model_dump_json(indent=2) + "\n")
                return release
            except EdgebuildError:
                replace_dir(final)
        staging.rename(final)
        return release
    except (BlobError, OSError) as exc:
        message = exc.message if isinstance(exc, BlobError) else str(exc)
        raise Refused(message) from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _engine(staging: Path, final: Path, built: ArtifactManifest,
            options: AgentOptions) -> str:
    """The Jetson rule (jetson.py): a TensorRT variant's shipped engine is used only if
    it was built for this device's TensorRT and GPU, else the engine is built here from
    the TensorRT-ready ONNX; what happened, for release.json ("" for other backends)."""
    if built.backend != "tensorrt":
        return ""
    from edgebuild.fleet import jetson

    try:
        facts = jetson.device_facts(options.device_facts)
    except EdgebuildError as exc:
        raise Refused(exc.message, exc.hint) from None
    decision = jetson.decide(built, staging / "files", facts)
    if decision.action == "refuse":
        raise Refused(decision.reason)
    if decision.action == "build":
        if jetson.built_here(final, facts):  # a kept release (a rollback): built before
            return f"{decision.reason}; the engine this device built before is kept"
        try:
            return f"{decision.reason}; {jetson.build_engine(staging, built, facts)}"
        except EdgebuildError as exc:
            raise Refused(f"{decision.reason}, but {exc.message}", exc.hint) from None
    return decision.reason


def _local_files(root: Path) -> dict[str, Path]:
    """sha256 hex -> a file of a kept release (a device re-downloads only what changed;
    each is verified again while it is copied)."""
    found: dict[str, Path] = {}
    for folder in sorted((root / "releases").iterdir()):
        if folder.name.startswith(".") or not (folder / MANIFEST_NAME).is_file():
            continue
        try:
            manifest = read_manifest(folder / MANIFEST_NAME)
            for entry in manifest.files:
                found.setdefault(entry.sha256, confined(folder / "files", entry.name))
        except EdgebuildError:
            continue
    return found


def replace_dir(folder: Path) -> None:
    """Remove a release folder: renamed aside first, so no half-deleted release keeps
    its name. One that is already gone (removed by hand) is not an error."""
    aside = folder.with_name(f".old-{uuid.uuid4().hex[:8]}")
    try:
        folder.rename(aside)
    except FileNotFoundError:
        return
    shutil.rmtree(aside, ignore_errors=True)
