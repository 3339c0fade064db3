"""A shared second tier for the store: any fsspec URL (a folder, SFTP, S3-compatible).

A team's machines each keep their own local store; the shared store lets a
second machine reuse what the first built:

    lookup: local store ──miss──▶ shared manifest ──parse, names confined, signed by a
                                  trusted writer──▶ download, check every digest
                                  before writing, publish locally
    build:  local commit ─────────▶ upload the files, then the signed manifest
                                    (to a temporary name, then moved into place)

Layout (the local store's): `<url>/objects/ab/<key>/{files…, artifact.json}`.

Whoever can write the store is not trusted (docs/security.md): a manifest is a
typed value checked before the first byte is written (cache/manifest.py), and an
entry is used only when its writer's Ed25519 signature verifies against a key
this reader trusts (cache/signing.py), unless the user said `--shared-cache-trust
any` for a store only they can write. Even then, the outputs gates compare against
(EVIDENCE_OPS: the FP32 reference) come only from a trusted writer. A refused
entry costs one warning per run and a local build.

Measurements (accuracy outputs, latency figures) are never shared: they belong
to the machine that made them. A missing or unreachable shared store costs one
warning, never a failed build; URLs are shown with their password redacted.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import uuid
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from edgebuild.cache.manifest import Manifest
from edgebuild.cache.signing import ANY, KEY_ENV, Signer, Trust, default_key_path, signer_for
from edgebuild.cache.store import MANIFEST, Store
from edgebuild.core.artifact import Artifact
from edgebuild.core.paths import confined
from edgebuild.core.redact import redact
from edgebuild.errors import EdgebuildError

log = logging.getLogger(__name__)

SHARED_CACHE_ENV = "EDGEBUILD_SHARED_CACHE"
MAX_MANIFEST = 64 << 20  # bytes: a manifest lists names and digests, never data

# Stages whose output a gate compares a build against: forging one forges a verdict,
# so it is taken only from a trusted writer, whatever `trust any` says.
EVIDENCE_OPS = frozenset({"reference"})


def shared_store(url: str, trust_specs: list[str], key: Path | None) -> SharedStore | None:
    """The run's shared store: the writer key (`key`, $EDGEBUILD_SHARED_CACHE_KEY, else
    the default key, made on first use), the keys it trusts, and the connection."""
    key = key or (Path(os.environ[KEY_ENV]) if os.environ.get(KEY_ENV) else None)
    try:
        signer: Signer | None = signer_for(key)
    except OSError as exc:  # no writable config dir: read, but do not upload
        log.warning("cannot create the shared-cache signing key %s (%s); this run will "
                    "not upload", default_key_path(), exc.strerror or exc)
        signer = None
    trust = Trust.configure(trust_specs, signer.raw_public if signer else None)
    return open_shared(url, trust, signer)


def open_shared(url: str, trust: Trust, signer: Signer | None) -> SharedStore | None:
    """The shared store at `url`, or None with one warning when it cannot be reached
    (the run then builds locally, as without --shared-cache)."""
    try:
        return SharedStore(url, trust, signer)
    except EdgebuildError:
        raise
    except Exception as exc:  # a refused connection, a DNS failure, bad credentials…
        log.warning("shared cache %s is unreachable (%s: %s); building locally",
                    redact(url), type(exc).__name__, redact(str(exc)))
        return None


class SharedStore:
    def __init__(self, url: str, trust: Trust | None = None,
                 signer: Signer | None = None) -> None:
        try:
            import fsspec
        except ImportError:
            raise EdgebuildError("--shared-cache needs fsspec",
                                 "pip install 'edgebuild[distributed]'") from None
        self.url = redact(url)  # all this object ever shows
        try:
            self.fs, root = fsspec.core.url_to_fs(url)
        except (ImportError, ValueError) as exc:
            raise EdgebuildError(f"--shared-cache {self.url}: {redact(str(exc))}",
                                 "a folder, file://, sftp://, s3://… (with its fsspec "
                                 "package installed)") from None
        self.root = root.rstrip("/")
        self.trust = trust if trust is not None else Trust()
        self.signer = signer
        self.fetched = 0
        self.pushed = 0
        self.refused = 0
        self.broken = False  # unreachable mid-run: not asked again
        self._warned: set[str] = set()

    def _entry(self, key: str) -> str:
        return f"{self.root}/objects/{key[:2]}/{key}"

    def _once(self, kind: str, message: str) -> None:
        """One warning per kind per run: a poisoned store refuses every entry, and a
        hundred identical lines would hide the first."""
        if kind in self._warned:
            log.info("shared cache %s: %s", self.url, message)
            return
        self._warned.add(kind)
        log.warning("shared cache %s: %s", self.url, message)

    def _unreachable(self, what: str, exc: BaseException) -> None:
        self.broken = True
        self._once("unreachable", f"cannot {what} ({type(exc).__name__}: "
                   f"{redact(str(exc))}); building locally for the rest of this run")

    def _refuse(self, kind: str, key: str, why: str, hint: str = "") -> None:
        self.refused += 1
        more = "" if kind in self._warned else " (further refusals this run are not shown)"
        self._once(kind, f"refusing entry {key[:12]}…: {why}; building it locally{more}"
                   + (f"\n  hint: {hint}" if hint else ""))

    def fetch(self, key: str, store: Store, op: str = "") -> Artifact | None:
        """The entry, checked, downloaded into the local store; None on a miss or a
        refusal. `op` is the reader's own stage op (never the manifest's word for it)."""
        if self.broken:
            return None
        entry = self._entry(key)
        try:
            raw = self.fs.cat_file(f"{entry}/{MANIFEST}")
        except FileNotFoundError:
            return None
        except Exception as exc:
            self._unreachable("read it", exc)
            return None
        if len(raw) > MAX_MANIFEST:
            self._refuse("damaged", key, "its manifest is too large")
            return None
        try:
            manifest = Manifest.model_validate_json(raw)
        except ValidationError as exc:
            self._refuse("damaged", key, f"its manifest does not parse "
                         f"({exc.error_count()} problem(s), first: "
                         f"{exc.errors()[0]['msg']})")
            return None
        work = store.begin(key)
        problem = manifest.problem(key, work)
        if problem:
            store.abandon(work)
            self._refuse("unsafe", key, problem)
            return None
        why = self.trust.verify(manifest.signature, manifest.statement())
        if why and (not self.trust.anyone or op in EVIDENCE_OPS):
            store.abandon(work)
            evidence = " (a reference output: only ever from a trusted writer)" \
                if self.trust.anyone else ""
            self._refuse("untrusted", key, f"{why}{evidence}",
                         "trust its writer's public key with --shared-cache-trust KEYFILE "
                         "(see docs/distributed.md)")
            return None
        return self._download(key, entry, manifest, work, store, signed=not why)

    def _download(self, key: str, entry: str, manifest: Manifest, work: Any, store: Store,
                  signed: bool) -> Artifact | None:
        try:
            for name, digest in manifest.files.items():
                data = self.fs.cat_file(f"{entry}/{name}")
                if (len(data) != manifest.sizes[name]
                        or hashlib.sha256(data).hexdigest() != digest):
                    store.abandon(work)
                    self._refuse("damaged", key, f"file {name} does not match its manifest's "
                                 "digests")
                    return None
                file = confined(work, name, "a shared-cache file name")
                file.parent.mkdir(parents=True, exist_ok=True)
                file.write_bytes(data)
            provenance: dict[str, Any] = {
                "origin": {"store": self.url, "trust": "key" if signed else ANY}}
            if manifest.signature is not None:
                provenance["signature"] = manifest.signature.model_dump()
            artifact = store.commit(key, work, manifest.format, manifest.metadata, provenance)
        except Exception as exc:
            store.abandon(work)
            self._unreachable(f"download entry {key[:12]}…", exc)
            return None
        if artifact.files != manifest.files:  # cannot differ: each file was checked
            store.remove(key)
            self._refuse("damaged", key, "it does not match its manifest's digests")
            return None
        self.fetched += 1
        return artifact

    def _current(self, key: str) -> bool:
        """The store already holds a usable entry for `key` (a manifest that parses and
        that this machine would accept): nothing to upload. A manifest cut short by a
        killed upload, or an entry this machine refuses, is replaced."""
        try:
            raw = self.fs.cat_file(f"{self._entry(key)}/{MANIFEST}")
        except FileNotFoundError:
            return False
        try:
            manifest = Manifest.model_validate_json(raw)
        except ValidationError:
            return False
        if manifest.key != key:
            return False
        return self.trust.anyone or not self.trust.verify(manifest.signature,
                                                          manifest.statement())

    def push(self, artifact: Artifact) -> None:
        """Upload a locally built, signed entry: files first, then the manifest to a
        temporary name moved into place, so a reader never sees half a manifest.
        Errors only warn."""
        if self.broken:
            return
        if self.signer is None:
            self._once("unsigned", "no signing key: not uploading what this run builds")
            return
        key = artifact.key
        entry = self._entry(key)
        manifest = {"key": key, "format": artifact.format, "files": artifact.files,
                    "sizes": artifact.sizes, "metadata": artifact.metadata,
                    "created": artifact.created,
                    "signature": self.signer.sign(key, artifact.format, artifact.files,
                                                  artifact.sizes, artifact.metadata
                                                  ).model_dump()}
        try:
            if self._current(key):
                return
            for name in artifact.files:
                self.fs.makedirs(f"{entry}/{name}".rsplit("/", 1)[0], exist_ok=True)
                self.fs.pipe_file(f"{entry}/{name}", (artifact.path / name).read_bytes())
            partial = f"{entry}/.{MANIFEST}.{uuid.uuid4().hex}.tmp"
            self.fs.pipe_file(partial, json.dumps(manifest, indent=1, sort_keys=True).encode())
            self.fs.mv(partial, f"{entry}/{MANIFEST}")
        except Exception as exc:
            self._unreachable(f"upload entry {key[:12]}…", exc)
            return
        self.pushed += 1
