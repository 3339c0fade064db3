"""An OCI distribution registry as a `Store` (layout.py), over plain urllib.

    http(s)://HOST[:PORT]/REPOSITORY        (publish --to, agent --from)
    http(s)://HOST[:PORT]/REPOSITORY:TAG    (promote)

The distribution spec's endpoints, nothing else: `GET|HEAD /v2/<name>/blobs/<digest>`,
`POST /v2/<name>/blobs/uploads/` then `PUT <location>?digest=` (a monolithic upload),
`GET|PUT /v2/<name>/manifests/<reference>`. No referrers API (CNCF distribution 2.8
has none): the referrers fallback tag `sha256-<hex>` works everywhere (promote.py).

Nothing a registry says is trusted: a manifest fetched by tag is hashed here (never
the `Docker-Content-Digest` header), every blob is hashed and sized while it streams,
and a registry that serves other bytes is refused — distribution serves a corrupted
blob as it is. Downloads resume: the bytes of an interrupted download stay in a
`.part` file and the next attempt asks for the rest (`Range: bytes=N-`); a server
that answers 200 instead of 206 is read from the start.

Plain http:// only to a loopback address (a test registry); anything else is https.
"""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, BinaryIO, Final

from edgebuild.errors import EdgebuildError
from edgebuild.fleet.layout import (
    BlobError,
    Layout,
    Records,
    Store,
    copy_verified,
    parse_ref,
)
from edgebuild.fleet.records import (
    INDEX,
    MANIFEST,
    MAX_JSON,
    Descriptor,
    describe,
    sha256_digest,
)

LOOPBACK: Final = ("127.0.0.1", "localhost", "::1", "[::1]")
TIMEOUT_S = 60.0
_CHUNK = 1 << 20
MANIFEST_TYPES: Final = (MANIFEST, INDEX)


def open_store(text: str, with_tag: bool) -> tuple[Store, str | None]:
    """The store a reference names (oci-layout:DIR[:TAG] or http(s)://HOST/REPO[:TAG])."""
    if text.startswith(("http://", "https://")):
        return Registry.parse(text, with_tag)
    folder, tag = parse_ref(text, with_tag)
    return Layout(folder), tag


class Registry(Records):
    """One repository of an OCI distribution registry."""

    def __init__(self, base: str, repository: str) -> None:
        self.base = base.rstrip("/")
        self.repository = repository
        self.written = 0
        self._fetched: dict[str, bytes] = {}  # digest -> verified manifest bytes

    @classmethod
    def parse(cls, text: str, with_tag: bool) -> tuple[Registry, str | None]:
        url = urllib.parse.urlsplit(text)
        path = url.path.strip("/")
        tag = None
        if with_tag:
            path, _, tag = path.rpartition(":")
            if not path or not tag:
                raise EdgebuildError(f"{text!r}: no version", "write URL/REPOSITORY:VERSION")
        if not path or url.query or url.fragment or url.username or url.password:
            raise EdgebuildError(f"{text!r}: not a registry repository",
                                 "write http(s)://HOST[:PORT]/REPOSITORY (credentials are "
                                 "not taken in the URL)")
        if url.scheme == "http" and url.hostname not in LOOPBACK:
            raise EdgebuildError(f"{text!r}: plain http to another machine",
                                 "use https:// (http:// is for a loopback test registry)")
        return cls(f"{url.scheme}://{url.netloc}", path), tag

    @property
    def where(self) -> str:
        return f"{self.base}/{self.repository}"

    def init(self) -> None:
        self._request("GET", f"{self.base}/v2/", expect=(200,)).close()

    # -- writing ---------------------------------------------------------------------
    def put(self, media_type: str, data: bytes, annotations: dict[str, str] | None = None,
            artifact_type: str | None = None) -> Descriptor:
        descriptor = describe(media_type, data, annotations, artifact_type)
        if media_type in MANIFEST_TYPES:
            if not self._has("manifests", descriptor.digest):
                self._put_manifest(descriptor.digest, media_type, data)
                self.written += 1
            self._fetched[descriptor.digest] = data
        elif not self._has_blob(descriptor.digest):
            self._upload(descriptor.digest, data)
        return descriptor

    def put_file(self, media_type: str, path: Path, sha256: str, size: int,
                 annotations: dict[str, str]) -> Descriptor:
        data = path.read_bytes()  # whole: model files of edge builds fit in memory
        descriptor = Descriptor(media_type=media_type, digest=f"sha256:{sha256}", size=size,
                                annotations=annotations)
        if len(data) != size or sha256_digest(data) != descriptor.digest:
            raise BlobError(f"{path} changed since the build (size or sha256)")
        if not self._has_blob(descriptor.digest):
            self._upload(descriptor.digest, data)
        return descriptor

    def tag(self, name: str, descriptor: Descriptor) -> None:
        self._put_manifest(name, descriptor.media_type, self.read_blob(descriptor))

    def _has_blob(self, digest: str) -> bool:
        return self._has("blobs", digest)

    def _has(self, kind: str, digest: str) -> bool:
        try:
            self._request("HEAD", self._url(kind, digest), expect=(200,),
                          headers={"Accept": ", ".join(MANIFEST_TYPES)}).close()
            return True
        except _NotFound:
            return False

    def _upload(self, digest: str, data: bytes) -> None:
        started = self._request("POST", self._url("blobs", "uploads/"), expect=(202,))
        location = started.headers.get("Location", "")
        started.close()
        url = urllib.parse.urljoin(f"{self.base}/", location)
        if urllib.parse.urlsplit(url).netloc != urllib.parse.urlsplit(self.base).netloc:
            raise EdgebuildError(f"{self.where}: the upload location leads to another host")
        joiner = "&" if "?" in url else "?"
        self._request("PUT", f"{url}{joiner}digest={digest}", data=data, expect=(201,),
                      headers={"Content-Type": "application/octet-stream"}).close()
        self.written += 1

    def _put_manifest(self, reference: str, media_type: str, data: bytes) -> None:
        self._request("PUT", self._url("manifests", reference), data=data, expect=(201,),
                      headers={"Content-Type": media_type}).close()
        self._fetched[sha256_digest(data)] = data

    # -- reading ---------------------------------------------------------------------
    def lookup(self, name: str) -> Descriptor | None:
        """What tag `name` names, described from the bytes fetched (hashed here)."""
        try:
            reply = self._request("GET", self._url("manifests", name), expect=(200,),
                                  headers={"Accept": ", ".join(MANIFEST_TYPES)})
        except _NotFound:
            return None
        with reply:
            data = reply.read(MAX_JSON + 1)
        if len(data) > MAX_JSON:
            raise BlobError(f"{self.where}: tag {name!r} names a record over {MAX_JSON} bytes")
        try:
            fields: Any = json.loads(data)
        except ValueError:
            raise BlobError(f"{self.where}: tag {name!r} is not a JSON manifest") from None
        media_type = fields.get("mediaType") if isinstance(fields, dict) else None
        if media_type not in MANIFEST_TYPES:
            raise BlobError(f"{self.where}: tag {name!r} names a {media_type!r}, not an OCI "
                            "manifest or index")
        described = describe(str(media_type), data, None, fields.get("artifactType"))
        self._fetched[described.digest] = data
        return described

    def resolve(self, name: str) -> Descriptor:
        found = self.lookup(name)
        if found is None:
            raise EdgebuildError(f"{self.where}: no tag {name!r}")
        return found

    def read_blob(self, descriptor: Descriptor) -> bytes:
        if descriptor.size > MAX_JSON:
            raise BlobError(f"{self.where}: blob {descriptor.digest} is {descriptor.size} "
                            f"bytes, more than a record may be ({MAX_JSON})")
        data = self._fetched.get(descriptor.digest)
        if data is None:
            kind = "manifests" if descriptor.media_type in MANIFEST_TYPES else "blobs"
            with self._request("GET", self._url(kind, descriptor.digest), expect=(200,),
                               headers={"Accept": descriptor.media_type}) as reply:
                data = reply.read(descriptor.size + 1)
        if len(data) != descriptor.size or sha256_digest(data) != descriptor.digest:
            raise BlobError(f"{self.where}: {descriptor.digest} does not match its digest "
                            "and size (tampered or truncated)")
        self._fetched[descriptor.digest] = data
        return data

    def copy_blob(self, descriptor: Descriptor, target: Path,
                  partial: Path | None = None) -> int:
        """Download a blob to `target`, resuming `partial` (kept when the connection
        breaks; removed when the bytes turn out wrong); bytes transferred."""
        part = partial or target.with_name(f".{target.name}.download")
        part.parent.mkdir(parents=True, exist_ok=True)
        have = part.stat().st_size if part.is_file() else 0
        if have > descriptor.size:
            part.unlink()
            have = 0
        headers = {"Range": f"bytes={have}-"} if have > 0 else {}
        transferred = 0
        if have < descriptor.size or descriptor.size == 0:
            reply = self._request("GET", self._url("blobs", descriptor.digest),
                                  expect=(200, 206), headers=headers)
            with reply, part.open("ab" if reply.status == 206 else "wb") as out:
                if reply.status != 206:
                    have = 0
                transferred = _stream(reply, out, descriptor.size - have)
            if have + transferred < descriptor.size:  # the body ended early: resume later
                raise EdgebuildError(f"{self.where}: download of {descriptor.digest} "
                                     f"interrupted after {have + transferred} of "
                                     f"{descriptor.size} bytes; the next check resumes it")
        try:
            with part.open("rb") as source:
                copy_verified(source, target, descriptor, self.where)
        except BlobError:
            part.unlink(missing_ok=True)  # wrong bytes: the next attempt starts over
            raise
        part.unlink(missing_ok=True)
        return transferred

    # -- HTTP ------------------------------------------------------------------------
    def _url(self, kind: str, reference: str) -> str:
        return f"{self.base}/v2/{self.repository}/{kind}/{reference}"

    def _request(self, method: str, url: str, expect: tuple[int, ...],
                 data: bytes | None = None, headers: dict[str, str] | None = None) -> Any:
        request = urllib.request.Request(url, data=data, method=method, headers=headers or {})
        try:
            reply = urllib.request.urlopen(request, timeout=TIMEOUT_S)
        except urllib.error.HTTPError as exc:
            body = exc.read(2000).decode("utf-8", "replace")
            exc.close()
            if exc.code == 404:
                raise _NotFound(url) from None
            raise EdgebuildError(f"{self.where}: {method} {url} answered {exc.code} "
                                 f"{exc.reason}: {_first_error(body)}") from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise EdgebuildError(f"{self.where}: {method} {url} failed: {reason}",
                                 "is the registry running and reachable?") from None
        if reply.status not in expect:
            reply.close()
            raise EdgebuildError(f"{self.where}: {method} {url} answered {reply.status}")
        return reply


class _NotFound(EdgebuildError):
    pass


def _stream(reply: BinaryIO, out: BinaryIO, most: int) -> int:
    """Append at most `most` (+1, to notice a longer blob) bytes of `reply` to `out`."""
    total = 0
    try:
        while chunk := reply.read(min(_CHUNK, most - total + 1)):
            out.write(chunk)
            total += len(chunk)
            if total > most:
                break
    except (OSError, http.client.HTTPException) as exc:  # broken: what arrived stays
        out.flush()
        raise EdgebuildError(f"download interrupted after {total} more bytes ({exc}); "
                             "the next check resumes it") from None
    return total


def _first_error(body: str) -> str:
    try:
        errors = json.loads(body).get("errors") or []
        return str(errors[0].get("message", ""))[:200] if errors else body[:200]
    except (ValueError, AttributeError, TypeError):
        return body[:200]

