"""The artifact manifest: what one target's build ships, as one typed record.

Every run writes it beside the files it copies, as `artifacts/<target>/manifest.json`
(run/artifacts.py): the stage that built them and its key, each file with its sha256
and size, what a runner needs besides the files (`Backend.runner_metadata`), the
backend and tool versions, the resolved target profile, and the target's gate results.
`run --baseline` imports a baseline build from it (measuring/import_baseline.py); it is the
record `edgebuild publish` ships (annotations and layers are read from it). So it is
read as *untrusted* input: the schema is strict, every file name is confined to the
folder it came in, and every file is checked against its digest and size before use.

    artifacts/host-cpu/
      model.onnx          the files, as the compile stage wrote them
      manifest.json       ArtifactManifest (written last: present means complete)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from edgebuild.core.digest import digest_file
from edgebuild.core.paths import confined
from edgebuild.core.profile import Device, TargetProfile
from edgebuild.core.untrusted import loads
from edgebuild.errors import EdgebuildError

SCHEMA_VERSION: Final = 1
MANIFEST_NAME = "manifest.json"
MEDIA_TYPE: Final = "application/vnd.edgebuild.artifact.manifest.v1+json"
SHA256 = r"^[0-9a-f]{64}$"
MAX_MANIFEST_BYTES = 16 << 20  # read whole: a larger "manifest" is refused, not parsed
REBUILD_HINT = ("rebuild the baseline with this edgebuild (run its recipe again on the "
                "baseline's commit; in CI, the next build of main writes one)")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ManifestFile(_Strict):
    """One file of the artifact, relative to the manifest's folder."""

    name: str = Field(min_length=1, max_length=1024)
    sha256: str = Field(pattern=SHA256)
    size: int = Field(ge=0)


class GateFigure(_Strict):
    """One gate's verdict and figures (a GateResult without its samples and details)."""

    gate: str
    status: str
    passed: bool = Field(description="True unless the result fails the run.")
    measured: dict[str, float] = Field(default_factory=dict)
    limits: dict[str, float] = Field(default_factory=dict)
    message: str = ""


class ArtifactManifest(_Strict):
    """What one target's build ships and how it was made and judged."""

    schema_version: Literal[1] = SCHEMA_VERSION
    media_type: Literal["application/vnd.edgebuild.artifact.manifest.v1+json"] = MEDIA_TYPE
    edgebuild_version: str
    created: str = Field(description="When the run started, ISO 8601 UTC.")
    recipe: str
    target: str
    candidate: str | None = Field(None, description="A search target's chosen candidate.")
    profile: TargetProfile = Field(description="The resolved profile: the recipe's "
                                   "overrides (and a candidate's options) applied.")
    backend: str
    backend_version: int
    tools: dict[str, str] = Field(description="Distribution -> installed version, for the "
                                  "backend's tools.")
    precision: str
    builds_on_device: bool = Field(description="The device builds what it runs from these "
                                   "files (TensorRT: the engine from the ONNX).")
    stage: str = Field(description="The stage that produced the files.")
    stage_key: str = Field(pattern=SHA256)
    format: str
    main: str = Field(description="The primary file (or folder: an .mlpackage).")
    files: list[ManifestFile] = Field(min_length=1)
    ships: list[str] = Field(default_factory=list, description="What is deployed, when "
                             "not every file (a Core ML build keeps a host proxy beside).")
    runner_metadata: dict[str, Any] = Field(default_factory=dict, description="What the "
                                            "backend's runner reads besides the files.")
    gates: list[GateFigure] = Field(default_factory=list)
    passed: bool = Field(description="Every gate of the target passed (or only warned).")

    @model_validator(mode="after")
    def _consistent(self) -> ArtifactManifest:
        names = [f.name for f in self.files]
        if len(set(names)) != len(names):
            raise ValueError("a file is listed twice")
        if not any(n == self.main or n.startswith(f"{self.main}/") for n in names):
            raise ValueError(f"main {self.main!r} is not one of the files")
        return self

    @property
    def device(self) -> Device:
        return self.profile.device

    @property
    def size_bytes(self) -> int:
        return sum(f.size for f in self.files)


def read_manifest(path: Path) -> ArtifactManifest:
    """The manifest at `path`, validated; an EdgebuildError naming the file and key (and
    what to do) for a missing, older, newer or malformed one — never a traceback."""
    try:
        if path.stat().st_size > MAX_MANIFEST_BYTES:
            raise EdgebuildError(f"{path}: larger than {MAX_MANIFEST_BYTES >> 20} MiB, not "
                                 "a manifest edgebuild wrote", REBUILD_HINT)
        data = loads(path.read_bytes(), finite=False)  # depth-limited: no RecursionError
    except FileNotFoundError:
        raise EdgebuildError(f"{path}: no manifest: this build was made by an edgebuild that "
                             "wrote none (before the artifact manifest)", REBUILD_HINT) from None
    except (OSError, ValueError) as exc:
        raise EdgebuildError(f"{path}: not a readable JSON manifest ({exc})",
                             REBUILD_HINT) from None
    version = data.get("schema_version") if isinstance(data, dict) else None
    if isinstance(version, int) and version > SCHEMA_VERSION:
        raise EdgebuildError(f"{path}: manifest schema {version} is newer than this "
                             f"edgebuild's ({SCHEMA_VERSION})",
                             "upgrade edgebuild, or rebuild the baseline with this one")
    try:
        return ArtifactManifest.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        key = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise EdgebuildError(f"{path}: key {key}: {first['msg']}", REBUILD_HINT) from None


def verified_files(folder: Path, manifest: ArtifactManifest,
                   where: Path | None = None) -> dict[str, Path]:
    """name -> path of each file the manifest lists, each confined to `folder` and checked
    against its size and sha256; EdgebuildError on the first that is not what it says."""
    label = where or folder / MANIFEST_NAME
    found: dict[str, Path] = {}
    for entry in manifest.files:
        path = confined(folder, entry.name, f"{label}: a file name", verb="read")
        if not path.is_file():
            raise EdgebuildError(f"{label}: file {entry.name} is missing",
                                 "keep the whole artifacts/<target>/ folder of the build")
        if path.stat().st_size != entry.size or digest_file(path) != entry.sha256:
            raise EdgebuildError(f"{label}: file {entry.name} does not match its recorded "
                                 "size and sha256 (changed since the build)", REBUILD_HINT)
        found[entry.name] = path
    return found
