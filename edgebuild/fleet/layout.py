"""An OCI image layout on disk (image-spec `image-layout.md`): the embedded registry.

    DIR/oci-layout            {"imageLayoutVersion": "1.0.0"}
    DIR/index.json            an image index: the tagged manifests (ref.name annotation)
    DIR/blobs/sha256/<hex>    content, named by its digest

A folder is what an offline device reads (a USB stick, an rsync'd mirror) and what
`publish` writes by default. Writes are content-addressed and atomic (a temporary
name, then a rename), so publishing the same build twice writes nothing new and a
reader never sees half a blob. Reads trust nothing: every blob is hashed and sized
while it is read or copied, and a mismatch is refused before any byte is used
(skopeo's habit; registries and folders alike serve corrupted bytes as they are).
"""

from __future__ import annotations

import hashlib
import os
import uuid
from pathlib import Path
from typing import BinaryIO, Final, Protocol, TypeVar

from pydantic import ValidationError

from edgebuild.core.untrusted import Untrusted, loads, open_regular, read_regular
from edgebuild.errors import EdgebuildError, printable
from edgebuild.fleet.records import (
    INDEX,
    MAX_JSON,
    REF_NAME,
    Descriptor,
    ImageIndex,
    ImageManifest,
    canonical,
    describe,
)

LAYOUT_FILE: Final = "oci-layout"
LAYOUT_VERSION: Final = {"imageLayoutVersion": "1.0.0"}
SCHEME: Final = "oci-layout:"
_CHUNK = 1 << 20


class BlobError(EdgebuildError):
    """A blob is not what its descriptor says (tampered, truncated, or missing)."""


def parse_ref(text: str, with_tag: bool) -> tuple[Path, str | None]:
    """`oci-layout:DIR` or `oci-layout:DIR:TAG` (the tag after the last colon)."""
    if not text.startswith(SCHEME):
        raise EdgebuildError(f"{text!r}: not an OCI layout reference",
                             "write oci-layout:DIR (publish, agent) or oci-layout:DIR:VERSION "
                             "(promote); a registry transport is not built yet")
    rest = text.removeprefix(SCHEME)
    if not with_tag:
        return Path(rest), None
    folder, _, tag = rest.rpartition(":")
    if not folder or not tag:
        raise EdgebuildError(f"{text!r}: no version", "write oci-layout:DIR:VERSION")
    return Path(folder), tag


class Store(Protocol):
    """Where releases live: an OCI image layout folder (`Layout`) or an OCI distribution
    registry (`remote.Registry`). Every read is verified against its descriptor."""

    written: int  # blobs and manifests this object stored that were not there before

    @property
    def where(self) -> str: ...
    def init(self) -> None: ...
    def put(self, media_type: str, data: bytes, annotations: dict[str, str] | None = None,
            artifact_type: str | None = None) -> Descriptor: ...
    def put_json(self, media_type: str, record: ImageManifest | ImageIndex,
                 annotations: dict[str, str] | None = None) -> Descriptor: ...
    def put_file(self, media_type: str, path: Path, sha256: str, size: int,
                 annotations: dict[str, str]) -> Descriptor: ...
    def tag(self, name: str, descriptor: Descriptor) -> None: ...
    def lookup(self, name: str) -> Descriptor | None: ...
    def resolve(self, name: str) -> Descriptor: ...
    def read_blob(self, descriptor: Descriptor) -> bytes: ...
    def manifest(self, descriptor: Descriptor) -> ImageManifest: ...
    def image_index(self, descriptor: Descriptor) -> ImageIndex: ...
    def copy_blob(self, descriptor: Descriptor, target: Path,
                  partial: Path | None = None) -> int: ...


class Records:
    """A store's manifests and indexes, parsed from blobs `read_blob` verified."""

    def read_blob(self, descriptor: Descriptor) -> bytes:
        raise NotImplementedError

    def put(self, media_type: str, data: bytes, annotations: dict[str, str] | None = None,
            artifact_type: str | None = None) -> Descriptor:
        raise NotImplementedError

    def put_json(self, media_type: str, record: ImageManifest | ImageIndex,
                 annotations: dict[str, str] | None = None) -> Descriptor:
        return self.put(media_type, canonical(record.to_json()), annotations,
                        record.artifact_type)

    def manifest(self, descriptor: Descriptor) -> ImageManifest:
        return parse_record(ImageManifest, self.read_blob(descriptor), descriptor.digest)

    def image_index(self, descriptor: Descriptor) -> ImageIndex:
        if descriptor.media_type != INDEX:
            raise EdgebuildError(f"{descriptor.digest} is a {descriptor.media_type}, not an "
                                 "image index (a release)")
        return parse_record(ImageIndex, self.read_blob(descriptor), descriptor.digest)


class Layout(Records):
    """One OCI image layout folder: write blobs and tags, read them back verified."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.written = 0

    @property
    def where(self) -> str:
        return f"{SCHEME}{self.root}"

    # -- writing ---------------------------------------------------------------------
    def init(self) -> None:
        (self.root / "blobs" / "sha256").mkdir(parents=True, exist_ok=True)
        if not (self.root / LAYOUT_FILE).exists():
            _atomic_write(self.root / LAYOUT_FILE, canonical(LAYOUT_VERSION))
        if not (self.root / "index.json").exists():
            self._write_index(ImageIndex())

    def put(self, media_type: str, data: bytes, annotations: dict[str, str] | None = None,
            artifact_type: str | None = None) -> Descriptor:
        """Store `data` (once: an existing blob is kept) and describe it."""
        descriptor = describe(media_type, data, annotations, artifact_type)
        path = self.blob_path(descriptor.digest)
        if not path.is_file():
            _atomic_write(path, data)
            self.written += 1
        return descriptor

    def put_file(self, media_type: str, path: Path, sha256: str, size: int,
                 annotations: dict[str, str]) -> Descriptor:
        """Store a file whose digest and size a manifest recorded: re-hashed while copied,
        refused if it changed since the build."""
        descriptor = Descriptor(media_type=media_type, digest=f"sha256:{sha256}", size=size,
                                annotations=annotations)
        target = self.blob_path(descriptor.digest)
        if not target.is_file():
            with path.open("rb") as source:
                copy_verified(source, target, descriptor, f"{path}")
            self.written += 1
        return descriptor

    def tag(self, name: str, descriptor: Descriptor) -> None:
        """Point tag `name` at `descriptor` (index.json, written atomically)."""
        index = self.index()
        tagged = descriptor.model_copy(update={"annotations": {
            **(descriptor.annotations or {}), REF_NAME: name}})
        kept = [d for d in index.manifests if d.annotation(REF_NAME) != name]
        self._write_index(index.model_copy(update={"manifests": [*kept, tagged]}))

    def _write_index(self, index: ImageIndex) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        _atomic_write(self.root / "index.json", canonical(index.to_json()))

    # -- reading ---------------------------------------------------------------------
    def blob_path(self, digest: str) -> Path:
        """blobs/sha256/<hex>; `digest` was validated by the Descriptor model."""
        algorithm, _, hexdigest = digest.partition(":")
        if algorithm != "sha256" or len(hexdigest) != 64 or \
                any(c not in "0123456789abcdef" for c in hexdigest):
            raise BlobError(f"{self.root}: unsupported digest {digest!r:.80}",
                            "edgebuild reads sha256 digests only")
        return self.root / "blobs" / "sha256" / hexdigest

    def index(self) -> ImageIndex:
        path = self.root / "index.json"
        if not (self.root / LAYOUT_FILE).exists() or not path.exists():
            raise EdgebuildError(f"{self.root} is not an OCI image layout (no oci-layout "
                                 "and index.json)", "publish to it first: edgebuild publish "
                                 "BUILD --to oci-layout:DIR --version V")
        try:  # unsigned: anyone who can write the folder wrote it
            data = read_regular(path, MAX_JSON)
        except Untrusted as exc:
            raise BlobError(f"{path}: {exc}") from None
        return parse_record(ImageIndex, data, f"{path}")

    def resolve(self, name: str) -> Descriptor:
        """The descriptor tag `name` points at; EdgebuildError listing the tags if none."""
        found = self.lookup(name)
        if found is None:
            known = sorted(t for t in self.tags() if not t.startswith("sha256-"))
            raise EdgebuildError(f"{self.root}: no tag {name!r}",
                                 f"tags: {', '.join(known) or 'none'}")
        return found

    def lookup(self, name: str) -> Descriptor | None:
        return self.tags().get(name)

    def tags(self) -> dict[str, Descriptor]:
        return {t: d for d in self.index().manifests if (t := d.annotation(REF_NAME))}

    def read_blob(self, descriptor: Descriptor) -> bytes:
        """A small blob's bytes (a manifest, an index, a statement), verified."""
        if descriptor.size > MAX_JSON:
            raise BlobError(f"{self.root}: blob {descriptor.digest} is {descriptor.size} "
                            f"bytes, more than a record may be ({MAX_JSON})")
        with self._open(descriptor, MAX_JSON) as handle:
            data = handle.read(descriptor.size + 1)
        if len(data) != descriptor.size or describe("", data).digest != descriptor.digest:
            raise BlobError(f"{self.root}: blob {descriptor.digest} does not match its "
                            "digest and size (tampered or truncated)",
                            "re-publish, or mirror the layout again from a good copy")
        return data

    def copy_blob(self, descriptor: Descriptor, target: Path,
                  partial: Path | None = None) -> int:
        """Copy a blob to `target`, hashing and counting every byte; BlobError (and no
        file left) when it is not the digest and size the descriptor says. Bytes read.
        (`partial`: where a registry keeps an interrupted download; a folder has none.)"""
        with self._open(descriptor, descriptor.size) as source:
            return copy_verified(source, target, descriptor, f"{self.root}")

    def _open(self, descriptor: Descriptor, limit: int) -> BinaryIO:
        """The blob, opened once it is a regular file of the descriptor's size: a FIFO,
        a device (an endless /dev/zero), a symlink or a file of another size is refused
        before a byte is read."""
        path = self.blob_path(descriptor.digest)
        try:
            return open_regular(path, limit, size=descriptor.size)
        except Untrusted as exc:
            raise BlobError(f"{self.root}: blob {descriptor.digest} is {exc}",
                            "the layout is incomplete or tampered with: mirror it "
                            "again") from None


def copy_verified(source: BinaryIO, target: Path, descriptor: Descriptor, where: str) -> int:
    """Stream `source` to `target` through sha256, refusing more or fewer bytes than
    the descriptor's size or another digest; the partial file is removed on refusal."""
    sha = hashlib.sha256()
    total = 0
    target.parent.mkdir(parents=True, exist_ok=True)
    part = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}.part")
    try:
        with part.open("wb") as out:
            while chunk := source.read(min(_CHUNK, descriptor.size - total + 1)):
                total += len(chunk)
                if total > descriptor.size:
                    break
                sha.update(chunk)
                out.write(chunk)
        if total != descriptor.size or f"sha256:{sha.hexdigest()}" != descriptor.digest:
            raise BlobError(f"{where}: blob {descriptor.digest} does not match its digest "
                            f"and size ({total} bytes read, {descriptor.size} expected): "
                            "tampered or truncated, refused",
                            "re-publish, or mirror the layout again from a good copy")
        part.replace(target)
    finally:
        part.unlink(missing_ok=True)
    return total


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(f".{path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")
    try:
        part.write_bytes(data)
        part.replace(path)
    finally:
        part.unlink(missing_ok=True)


M = TypeVar("M", ImageIndex, ImageManifest)


def parse_record(model: type[M], data: bytes, where: str) -> M:
    """A manifest or index from its bytes (depth- and number-checked JSON first)."""
    try:
        return model.model_validate(loads(data))
    except (ValueError, ValidationError) as exc:
        if isinstance(exc, ValidationError):
            first = exc.errors()[0]
            key = ".".join(str(p) for p in first["loc"]) or "(top level)"
            raise EdgebuildError(f"{where}: key {printable(key)}: {first['msg']}",
                                 "not a record edgebuild can read") from None
        raise EdgebuildError(f"{where}: {exc}") from None
