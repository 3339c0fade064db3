"""Artifact: what a stage produced, the only thing that passes between stages."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgebuild.core.digest import digest_json

# Metadata key: why this entry must never be served from the cache (a latency timed while
# other processes took the CPU); the run keeps it to judge, then drops it.
UNTRUSTED = "untrusted"
# Metadata key: a figure timed under load that every gate reading it passed, kept in the
# cache (load only slows); its value says what load (run/driver.forget_noisy).
UNDER_LOAD = "under_load"
# What the scheduler adds to a stage's own metadata when it stores the artifact.
STAGE_KEYS = ("main", "stage", "op", "seconds")


def stage_keys(main: str, stage: str, op: str, seconds: float) -> dict[str, Any]:
    """The STAGE_KEYS of an artifact: its main file, the stage and op that made it, and
    how long the op ran."""
    return {"main": main, "stage": stage, "op": op, "seconds": seconds}


@dataclass(frozen=True)
class Artifact:
    """What a stage produced: a folder of files with digests, a format and metadata.

    It is the only thing that passes between stages, and it is plain data, so a
    stage can run in another process or on another machine.
    """

    key: str
    format: str
    path: Path
    files: dict[str, str]  # relative name -> sha256
    sizes: dict[str, int]
    metadata: dict[str, Any] = field(default_factory=dict)
    created: float = 0.0

    @property
    def digest(self) -> str:
        """Digest of the content alone (not the key), so equal outputs compare equal."""
        return digest_json({"format": self.format, "files": self.files})

    @property
    def untrusted(self) -> str:
        """'' or why this entry may be used by the run that made it but never reused."""
        return str(self.metadata.get(UNTRUSTED) or "")

    @property
    def size_bytes(self) -> int:
        return sum(self.sizes.values())

    @property
    def shipped_bytes(self) -> int:
        """Bytes of what is deployed: the files under the names in `metadata["ships"]`
        when the producer lists them (a Core ML build keeps its accuracy proxy beside
        the .mlpackage), else every file. The size gate reads this."""
        ships = self.metadata.get("ships")
        if not ships:
            return self.size_bytes
        return sum(size for name, size in self.sizes.items()
                   if any(name == s or name.startswith(f"{s}/") for s in ships))

    @property
    def precision_label(self) -> str:
        """The producer's own label of the precision this artifact runs in
        (`metadata["precision"]["label"]`, e.g. OpenVINO's "bf16 requested; this CPU
        has no native bf16 (…): ran as f32"), or '' when it establishes none."""
        precision = self.metadata.get("precision")
        label = precision.get("label") if isinstance(precision, dict) else None
        return label if isinstance(label, str) else ""

    @property
    def main(self) -> Path:
        """The primary file (e.g. model.onnx), named by the producing op."""
        return self.path / str(self.metadata.get("main", next(iter(self.files), "")))

    def named(self, name: Any, what: str) -> Path:
        """A file the metadata names (a note, a shipped file): only ever one of this
        artifact's own files, confined to its folder, never an absolute or `..` path
        (a shared-cache entry's metadata comes from whoever wrote the store)."""
        from edgebuild.core.paths import confined
        from edgebuild.errors import EdgebuildError

        path = confined(self.path, name, what)
        if name not in self.files:
            raise EdgebuildError(f"refusing {what} {name!r:.120}: not a file of the artifact")
        return path

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key, "format": self.format, "path": str(self.path),
            "files": self.files, "sizes": self.sizes, "metadata": self.metadata,
            "created": self.created,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Artifact:
        return cls(
            key=data["key"], format=data["format"], path=Path(data["path"]),
            files=dict(data["files"]), sizes=dict(data["sizes"]),
            metadata=dict(data.get("metadata", {})), created=float(data.get("created", 0)),
        )
