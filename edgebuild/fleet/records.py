"""The OCI records edgebuild writes and reads: descriptors, image manifests, indexes.

Per the OCI image-spec (v1.1): a descriptor names content by digest and size; an image
manifest with an `artifactType` and the empty config is an artifact (its layers are
the files); an index lists manifests. Everything read back is untrusted: these models
validate shape and digest syntax, and whoever reads a blob checks its bytes
(layout.py). Unknown fields are ignored on read, as the spec asks of consumers.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field

DIGEST: Final = r"^sha256:[0-9a-f]{64}$"
MANIFEST: Final = "application/vnd.oci.image.manifest.v1+json"
INDEX: Final = "application/vnd.oci.image.index.v1+json"
EMPTY: Final = "application/vnd.oci.empty.v1+json"
EMPTY_DATA: Final = b"{}"
MODEL_ARTIFACT: Final = "application/vnd.edgebuild.model.v1"
STATEMENT_ARTIFACT: Final = "application/vnd.edgebuild.channel-statement.v1"
FILE_LAYER: Final = "application/vnd.edgebuild.model.file.v1"
REPORT_LAYER: Final = "application/vnd.edgebuild.report.target.v1+json"
STATEMENT_LAYER: Final = "application/vnd.edgebuild.channel-statement.v1+json"

# Annotation keys: OCI's own, and edgebuild's (reverse-DNS, as the spec asks).
REF_NAME: Final = "org.opencontainers.image.ref.name"
TITLE: Final = "org.opencontainers.image.title"
VERSION: Final = "org.opencontainers.image.version"
CREATED: Final = "org.opencontainers.image.created"
TARGET: Final = "dev.edgebuild.target"
PASSED: Final = "dev.edgebuild.gates.passed"
CHANNEL: Final = "dev.edgebuild.channel"
SEQUENCE: Final = "dev.edgebuild.sequence"

MAX_JSON = 4 << 20  # a manifest, index or statement larger than this is refused unread


class _Oci(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="ignore", frozen=True)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = self.model_dump(by_alias=True, exclude_none=True)
        return data


class Descriptor(_Oci):
    media_type: str = Field(alias="mediaType", max_length=255)
    digest: str = Field(pattern=DIGEST)
    size: int = Field(ge=0)
    artifact_type: str | None = Field(None, alias="artifactType", max_length=255)
    annotations: dict[str, str] | None = None

    @property
    def hex(self) -> str:
        return self.digest.removeprefix("sha256:")

    def annotation(self, key: str) -> str | None:
        return (self.annotations or {}).get(key)


class ImageManifest(_Oci):
    schema_version: int = Field(2, alias="schemaVersion")
    media_type: str = Field(MANIFEST, alias="mediaType")
    artifact_type: str | None = Field(None, alias="artifactType")
    config: Descriptor
    layers: list[Descriptor] = Field(max_length=100_000)
    subject: Descriptor | None = None
    annotations: dict[str, str] | None = None


class ImageIndex(_Oci):
    schema_version: int = Field(2, alias="schemaVersion")
    media_type: str = Field(INDEX, alias="mediaType")
    artifact_type: str | None = Field(None, alias="artifactType")
    manifests: list[Descriptor] = Field(default_factory=list, max_length=100_000)
    subject: Descriptor | None = None
    annotations: dict[str, str] | None = None


def canonical(value: Any) -> bytes:
    """The bytes edgebuild stores a JSON record as: sorted keys, no spaces, UTF-8 — the
    same record always has the same digest (publishing twice changes nothing)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False).encode("utf-8")


def sha256_digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def describe(media_type: str, data: bytes, annotations: dict[str, str] | None = None,
             artifact_type: str | None = None) -> Descriptor:
    return Descriptor(media_type=media_type, digest=sha256_digest(data), size=len(data),
                      annotations=annotations or None, artifact_type=artifact_type)


EMPTY_CONFIG: Final = describe(EMPTY, EMPTY_DATA)
