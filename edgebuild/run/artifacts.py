"""`artifacts/<target>/`: each target's final files and their manifest, written atomically.

The folder is assembled under a hidden name beside it (the files, then manifest.json,
which lists them) and renamed into place, so a reader — `run --baseline`, `publish`, a
CI step uploading the folder — sees the previous build's folder or this one, never a
half-copied mix, and a folder with a manifest is complete (core/manifest.py).
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from edgebuild import __version__
from edgebuild.cache.keys import tool_version
from edgebuild.core.manifest import MANIFEST_NAME, ArtifactManifest, GateFigure, ManifestFile
from edgebuild.core.paths import inside
from edgebuild.registry import backend_class

if TYPE_CHECKING:
    from edgebuild.core.artifact import Artifact
    from edgebuild.core.target import Target
    from edgebuild.gates.result import GateResult


def manifest_of(recipe: str, name: str, target: Target, compiled: Artifact, key: str,
                gates: list[GateResult], started: dt.datetime,
                candidate: str | None = None) -> ArtifactManifest:
    """The manifest of target `name`'s build: `compiled` (its compile stage's artifact,
    key `key`; a search's chosen candidate's, resolved as `target`) and its gates."""
    backend = backend_class(target.backend)
    declared = compiled.metadata.get("precision")
    return ArtifactManifest(
        edgebuild_version=__version__, created=started.isoformat(timespec="seconds"),
        recipe=recipe, target=name, candidate=candidate, profile=target.profile,
        backend=backend.name, backend_version=backend.version,
        tools={t: tool_version(t) for t in sorted(set(backend.tools))},
        precision=declared if isinstance(declared, str) else target.profile.precision.value,
        builds_on_device=backend.placement.device_build,
        stage=str(compiled.metadata.get("stage", "")), stage_key=key,
        format=compiled.format, main=compiled.main.relative_to(compiled.path).as_posix(),
        files=[ManifestFile(name=n, sha256=d, size=compiled.sizes[n])
               for n, d in sorted(compiled.files.items())],
        ships=[str(s) for s in compiled.metadata.get("ships") or []],
        runner_metadata={k: compiled.metadata[k] for k in backend.runner_metadata
                         if k in compiled.metadata},
        gates=[GateFigure(gate=g.gate, status=g.status.value, passed=bool(g),
                          measured=g.measured, limits=g.limits, message=g.message)
               for g in gates],
        passed=all(gates))


def export_target(out: Path, name: str, compiled: Artifact | None,
                  manifest: ArtifactManifest | None) -> str | None:
    """Replace `out/artifacts/<name>/` by `compiled`'s files and `manifest` (or remove it
    when nothing was built); the main file's path relative to `out`, or None."""
    destination = inside(out, "artifacts", name)
    staging = None
    if compiled is not None and manifest is not None:
        staging = inside(out, "artifacts", f".{name}.{os.getpid()}-{uuid.uuid4().hex[:8]}")
        staging.mkdir(parents=True)
        try:
            for file in manifest.files:
                (staging / file.name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(compiled.path / file.name, staging / file.name)
            part = staging / f".{MANIFEST_NAME}.tmp"
            part.write_text(manifest.model_dump_json(indent=2) + "\n")
            part.replace(staging / MANIFEST_NAME)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    old = None
    if destination.exists():  # moved aside, then the new folder renamed in: no mix
        old = inside(out, "artifacts", f".{name}.old-{uuid.uuid4().hex[:8]}")
        destination.rename(old)
    if staging is not None:
        staging.rename(destination)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    return str((destination / manifest.main).relative_to(out)) if manifest and staging else None
