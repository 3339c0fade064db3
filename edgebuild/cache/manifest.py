"""A shared-cache manifest, read as a typed value before anything of its entry is written.

Everything in a manifest fetched from a shared store comes from whoever can write
that store. It is parsed here first (unknown keys refused, digests 64 hex, sizes
non-negative, a file list and a size list that agree) and every name it gives
(its files, and the files its metadata points at: `main`, `notes`, `ships`) must
be a plain relative path inside the entry's folder (core/paths.confined), before
the first byte is downloaded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt

from edgebuild.cache.signing import HEX64, Signature, statement
from edgebuild.cache.store import MANIFEST
from edgebuild.core.paths import confined
from edgebuild.errors import EdgebuildError

Digest = Annotated[str, Field(pattern=HEX64)]
MAX_FILES = 100_000

# Metadata keys that name files of the entry: read by reports (notes), the size gate
# (ships) and every consumer (main).
FILE_KEYS = ("main", "notes", "ships")


class Manifest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    key: str = Field(pattern=HEX64)
    format: str = Field(min_length=1, max_length=64)
    files: dict[str, Digest] = Field(max_length=MAX_FILES)
    sizes: dict[str, NonNegativeInt] = Field(max_length=MAX_FILES)
    metadata: dict[str, Any]
    created: float = 0.0
    signature: Signature | None = None

    def statement(self) -> bytes | None:
        """What the signature must cover (None when unsigned)."""
        if self.signature is None:
            return None
        return statement(self.key, self.format, self.files, self.sizes, self.metadata,
                         self.signature.writer)

    def problem(self, key: str, root: Path) -> str:
        """'' when the manifest may be used for `key` with files under `root`, else why not."""
        if self.key != key:
            return f"it names another key ({self.key[:12]}…)"
        if set(self.files) != set(self.sizes):
            return "its file and size lists differ"
        try:
            for name in self.files:
                if name == MANIFEST:
                    raise EdgebuildError(f"refusing a file named {MANIFEST}")
                confined(root, name, "a shared-cache file name")
            for name in metadata_names(self.metadata):
                confined(root, name, "a file named by metadata")
                if not names_a_file(name, self.files):
                    raise EdgebuildError(f"metadata names {name!r}, not a file of the entry")
        except EdgebuildError as exc:
            return exc.message
        return ""


def metadata_names(metadata: dict[str, Any]) -> list[str]:
    """Every file name the metadata points at (`main`, `notes`, `ships`); a value of the
    wrong type comes back as itself, for `confined` to refuse."""
    names: list[Any] = []
    for field in FILE_KEYS:
        value = metadata.get(field)
        if value is None:
            continue
        names += value if isinstance(value, list) else [value]
    return names


def names_a_file(name: str, files: dict[str, str]) -> bool:
    """`name` is one of `files`, or a folder holding some (a .mlpackage)."""
    return name in files or any(f.startswith(f"{name}/") for f in files)
