"""`artifacts/<target>/`: each target's final files and their manifest, written atomically.

The folder is assembled under a hidden name beside it (the files, then manifest.json,
which lists them) and renamed into place, so a reader — `run --baseline`, `publish`, a
CI step uploading the folder — sees the previous build's folder or this one, never a
half-copied mix, and a folder with a manifest is complete (core/manifest.py).

A re-run whose target built the same files (a cached run) does not copy them again:
when the folder holds exactly those files, each with the stat signature (inode, size,
modification and change time) it had right after the export that wrote it — kept in
the cache's memo (cache/memo.py), keyed by the folder and the files' sha256, as the
store keeps its own entries' signatures — only manifest.json is replaced (atomically;
both manifests list the same files). A file edited, replaced or added since, or a
missing record, is the full export above. The change time cannot be set back by a user,
so a matching signature means the file was not written since.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import shutil
import stat
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgebuild import __version__
from edgebuild.cache.keys import tool_version
from edgebuild.cache.memo import remember, remembered_value
from edgebuild.cache.store import stat_signature
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


EXPORTED = "exported"  # the memo kind: an export's files' stat signatures


def export_target(out: Path, name: str, compiled: Artifact | None,
                  manifest: ArtifactManifest | None, cache_root: Path | None = None
                  ) -> str | None:
    """Replace `out/artifacts/<name>/` by `compiled`'s files and `manifest` (or remove it
    when nothing was built); the main file's path relative to `out`, or None. With
    `cache_root`, a folder that already holds exactly these files, unchanged since this
    code exported them there, keeps them (see the module's docstring)."""
    destination = inside(out, "artifacts", name)
    staging = None
    if compiled is not None and manifest is not None:
        inputs = _export_inputs(destination, manifest)
        if cache_root is not None and _unchanged(destination, manifest, remembered_value(
                cache_root, EXPORTED, dict[str, list[int]], inputs)):
            _write_manifest(destination, manifest)
            return str((destination / manifest.main).relative_to(out))
        staging = inside(out, "artifacts", f".{name}.{os.getpid()}-{uuid.uuid4().hex[:8]}")
        staging.mkdir(parents=True)
        try:
            for file in manifest.files:
                (staging / file.name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(compiled.path / file.name, staging / file.name)
            _write_manifest(staging, manifest)
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
    if manifest is None or staging is None:
        return None
    if cache_root is not None:  # the signatures the copies have now, in their folder
        # gone already (another run replaced it): copied again next time
        with contextlib.suppress(OSError):
            remember(cache_root, EXPORTED, dict[str, list[int]], inputs, {
                f.name: stat_signature((destination / f.name).stat()) for f in manifest.files})
    return str((destination / manifest.main).relative_to(out))


def _export_inputs(destination: Path, manifest: ArtifactManifest) -> dict[str, Any]:
    return {"folder": str(destination),
            "files": [[f.name, f.sha256, f.size] for f in manifest.files]}


def _write_manifest(folder: Path, manifest: ArtifactManifest) -> None:
    part = folder / f".{MANIFEST_NAME}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp"
    part.write_text(manifest.model_dump_json(indent=2) + "\n")
    part.replace(folder / MANIFEST_NAME)


def _unchanged(destination: Path, manifest: ArtifactManifest,
               signatures: dict[str, list[int]] | None) -> bool:
    """Whether `destination` holds exactly `manifest`'s files (and a manifest.json), each a
    regular file with the stat signature recorded right after it was exported."""
    if signatures is None or set(signatures) != {f.name for f in manifest.files}:
        return False
    wanted = {MANIFEST_NAME, *signatures}
    folders = {""} | {parent for n in signatures
                      for parent in (p.as_posix() for p in Path(n).parents) if parent != "."}
    try:
        if not stat.S_ISDIR(os.lstat(destination).st_mode):
            return False
        found, dirs = set(), {""}
        for here, subdirs, files in os.walk(destination):
            relative = Path(here).relative_to(destination).as_posix()
            prefix = "" if relative == "." else f"{relative}/"
            dirs |= {prefix + d for d in subdirs}
            found |= {prefix + f for f in files}
        if found != wanted or dirs != folders:
            return False
        for name in wanted:
            info = os.lstat(destination / name)
            if not stat.S_ISREG(info.st_mode):
                return False
            if name != MANIFEST_NAME and stat_signature(info) != signatures[name]:
                return False
    except OSError:
        return False
    return True
