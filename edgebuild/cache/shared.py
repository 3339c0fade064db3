"""A shared second tier for the store: any fsspec URL (a folder, SFTP, S3-compatible).

A team's machines each keep their own local store; the shared store lets a
second machine reuse what the first built:

    lookup: local store ──miss──▶ shared store ──hit──▶ download, verify every
                                                        digest, publish locally
    build:  local commit ─────────▶ upload the files, then the manifest

Layout (the local store's): `<url>/objects/ab/<key>/{files…, artifact.json}`.
The manifest is uploaded last, so a reader that finds it finds the whole entry;
a download that does not match the manifest's digests is refused with a warning
and the stage is built instead. A missing or unreachable shared store costs a
warning, never a failed build.

Measurements (accuracy outputs, latency figures) are not shared: they belong to
the machine that made them, and a shared store would hand one machine's timing
to another. Only what the build *produces* is.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from edgebuild.cache.store import MANIFEST, Store
from edgebuild.core.artifact import Artifact
from edgebuild.errors import EdgebuildError

log = logging.getLogger(__name__)

SHARED_CACHE_ENV = "EDGEBUILD_SHARED_CACHE"


class SharedStore:
    def __init__(self, url: str) -> None:
        try:
            import fsspec
        except ImportError:
            raise EdgebuildError("--shared-cache needs fsspec",
                                 "pip install 'edgebuild[distributed]'") from None
        try:
            self.fs, root = fsspec.core.url_to_fs(url)
        except (ImportError, ValueError) as exc:
            raise EdgebuildError(f"--shared-cache {url}: {exc}",
                                 "a folder, file://, sftp://, s3://… (with its fsspec "
                                 "package installed)") from None
        self.url = url
        self.root = root.rstrip("/")
        self.fetched = 0
        self.pushed = 0

    def _entry(self, key: str) -> str:
        return f"{self.root}/objects/{key[:2]}/{key}"

    def _warn(self, what: str, key: str, exc: BaseException) -> None:
        log.warning("shared cache %s: cannot %s %s… (%s: %s); building locally",
                    self.url, what, key[:12], type(exc).__name__, exc)

    def has(self, key: str) -> bool:
        try:
            return bool(self.fs.exists(f"{self._entry(key)}/{MANIFEST}"))
        except Exception:  # a shared store that cannot answer has nothing
            return False

    def fetch(self, key: str, store: Store) -> Artifact | None:
        """The entry, downloaded into the local store and verified; None on a miss."""
        entry = self._entry(key)
        try:
            manifest: dict[str, Any] = json.loads(self.fs.cat_file(f"{entry}/{MANIFEST}"))
        except FileNotFoundError:
            return None
        except Exception as exc:
            self._warn("read", key, exc)
            return None
        work = store.begin(key)
        try:
            for name in manifest["files"]:
                file = work / name
                file.parent.mkdir(parents=True, exist_ok=True)
                file.write_bytes(self.fs.cat_file(f"{entry}/{name}"))
            artifact = store.commit(key, work, manifest["format"], manifest["metadata"])
        except Exception as exc:
            store.abandon(work)
            self._warn("download", key, exc)
            return None
        if artifact.files != manifest["files"]:
            log.warning("shared cache %s: entry %s… does not match its manifest's digests; "
                        "refusing it and building locally", self.url, key[:12])
            store.remove(key)
            return None
        self.fetched += 1
        return artifact

    def push(self, artifact: Artifact) -> None:
        """Upload a locally built entry (files first, manifest last); errors only warn."""
        key = artifact.key
        entry = self._entry(key)
        try:
            if self.fs.exists(f"{entry}/{MANIFEST}"):
                return
            for name in artifact.files:
                self.fs.makedirs(f"{entry}/{name}".rsplit("/", 1)[0], exist_ok=True)
                self.fs.pipe_file(f"{entry}/{name}", (artifact.path / name).read_bytes())
            self.fs.pipe_file(f"{entry}/{MANIFEST}", (artifact.path / MANIFEST).read_bytes())
        except Exception as exc:
            self._warn("upload", key, exc)
            return
        self.pushed += 1
