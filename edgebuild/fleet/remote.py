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

Every read (a tag, a record, a blob) has a deadline of its own (`deadline_s`, the
agent's `--fetch-deadline`): a registry that answers one byte a second cannot hold an
agent, and its lock, past it. A timer shuts the connection's socket at the deadline
(a socket timeout alone only bounds the wait for each byte).

Plain http:// only to a loopback address (a test registry); anything else is https.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO, Final

from edgebuild.core.untrusted import Untrusted, loads
from edgebuild.errors import EdgebuildError, printable
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
FETCH_DEADLINE_S = 900.0  # one read (a tag, a record, a blob): the agent's --fetch-deadline
_CHUNK = 1 << 20
MANIFEST_TYPES: Final = (MANIFEST, INDEX)


def open_store(text: str, with_tag: bool,
               deadline_s: float = FETCH_DEADLINE_S) -> tuple[Store, str | None]:
    """The store a reference names (oci-layout:DIR[:TAG] or http(s)://HOST/REPO[:TAG]);
    a registry's reads end within `deadline_s` each."""
    if text.startswith(("http://", "https://")):
        registry, tag = Registry.parse(text, with_tag)
        registry.deadline_s = deadline_s
        return registry, tag
    folder, tag = parse_ref(text, with_tag)
    return Layout(folder), tag


class Registry(Records):
    """One repository of an OCI distribution registry."""

    def __init__(self, base: str, repository: str) -> None:
        self.base = base.rstrip("/")
        self.repository = repository
        self.written = 0
        self._fetched: dict[str, bytes] = {}  # digest -> verified manifest bytes
        self.deadline_s = FETCH_DEADLINE_S

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
        with self._deadline(f"GET tag {name!r}"):
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
            fields: Any = loads(data)
        except Untrusted as exc:
            raise BlobError(f"{self.where}: tag {name!r}: {exc}") from None
        media_type = fields.get("mediaType") if isinstance(fields, dict) else None
        artifact_type = fields.get("artifactType") if isinstance(fields, dict) else None
        if media_type not in MANIFEST_TYPES:
            raise BlobError(f"{self.where}: tag {name!r} names a "
                            f"{printable(repr(media_type)):.200}, not an OCI manifest or "
                            "index")
        if artifact_type is not None and not isinstance(artifact_type, str):
            raise BlobError(f"{self.where}: tag {name!r}: its artifactType is not a string")
        described = describe(str(media_type), data, None, artifact_type)
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
            with self._deadline(f"GET {descriptor.digest}"), \
                    self._request("GET", self._url(kind, descriptor.digest), expect=(200,),
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
            with self._deadline(f"GET {descriptor.digest}"):
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
    @contextlib.contextmanager
    def _deadline(self, what: str) -> Iterator[None]:
        """One read, ended at `deadline_s`: the sockets it opens are shut down then (a
        drip-feeding registry), and the error says it was the deadline."""
        watch = _Watch(self.deadline_s)
        token = _WATCH.watch
        _WATCH.watch = watch
        try:
            yield
        except (EdgebuildError, OSError, http.client.HTTPException) as exc:
            if watch.fired:
                raise EdgebuildError(watch.message(self.where, what)) from None
            if isinstance(exc, EdgebuildError):
                raise
            raise EdgebuildError(f"{self.where}: {what} failed: "
                                 f"{printable(str(exc))[:200] or type(exc).__name__}",
                                 "the next check tries again") from None
        finally:
            _WATCH.watch = token
            watch.cancel()
        if watch.fired:
            raise EdgebuildError(watch.message(self.where, what))

    def _url(self, kind: str, reference: str) -> str:
        return f"{self.base}/v2/{self.repository}/{kind}/{reference}"

    def _request(self, method: str, url: str, expect: tuple[int, ...],
                 data: bytes | None = None, headers: dict[str, str] | None = None) -> Any:
        request = urllib.request.Request(url, data=data, method=method, headers=headers or {})
        try:
            reply = _OPENER.open(request, timeout=TIMEOUT_S)
        except urllib.error.HTTPError as exc:
            body = exc.read(2000).decode("utf-8", "replace")
            exc.close()
            if exc.code == 404:
                raise _NotFound(url) from None
            raise EdgebuildError(f"{self.where}: {method} {url} answered {exc.code} "
                                 f"{exc.reason}: {_first_error(body)}") from None
        except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
            reason = printable(str(getattr(exc, "reason", exc)))[:200]
            raise EdgebuildError(f"{self.where}: {method} {url} failed: {reason}",
                                 "is the registry running and reachable?") from None
        if reply.status not in expect:
            reply.close()
            raise EdgebuildError(f"{self.where}: {method} {url} answered {reply.status}")
        return reply


class _NotFound(EdgebuildError):
    pass


class _Watch:
    """A deadline for one read: a timer that shuts down every socket the read opened."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.started = time.monotonic()
        self.fired = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.daemon = True
        self._timer.start()

    def add(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)
            if self.fired:
                _shut(sock)

    def _fire(self) -> None:
        with self._lock:
            self.fired = True
            for sock in self._sockets:
                _shut(sock)

    def cancel(self) -> None:
        self._timer.cancel()

    def message(self, where: str, what: str) -> str:
        took = time.monotonic() - self.started
        return (f"{where}: {what} did not finish within its deadline of {self.seconds:g} s "
                f"(stopped after {took:.1f} s): the registry is too slow or stalled; the "
                "next check tries again")


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        socket.socket.shutdown(sock, socket.SHUT_RDWR)  # the fd's, even under TLS


class _Local(threading.local):
    watch: _Watch | None = None


_WATCH = _Local()


def _connect(address: tuple[str, int], *args: Any, **kwargs: Any) -> socket.socket:
    """socket.create_connection, the socket handed to the read's deadline."""
    sock = socket.create_connection(address, *args, **kwargs)
    if _WATCH.watch is not None:
        _WATCH.watch.add(sock)
    return sock


class _Http(http.client.HTTPConnection):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._create_connection = _connect


class _Https(http.client.HTTPSConnection):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._create_connection = _connect


class _HttpHandler(urllib.request.HTTPHandler):
    def http_open(self, req: Any) -> Any:
        return self.do_open(_Http, req)


class _HttpsHandler(urllib.request.HTTPSHandler):
    def https_open(self, req: Any) -> Any:
        return self.do_open(_Https, req, context=getattr(self, "_context", None))


_OPENER = urllib.request.build_opener(_HttpHandler, _HttpsHandler)


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
        errors = loads(body).get("errors") or []
        return printable(str(errors[0].get("message", ""))[:200] if errors else body[:200])
    except (ValueError, AttributeError, TypeError, IndexError, KeyError):
        return printable(body[:200])

