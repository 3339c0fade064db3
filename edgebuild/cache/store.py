"""The content-addressed artifact store.

Layout under the cache root::

    objects/ab/abcdef…(64 hex)/   one finished entry: artifact.json + the files
    tmp/<key>.<pid>.<random>/      an entry being written (never read)
    trash/                         entries being deleted

An entry appears only by `rename(tmp/…, objects/…)`, which is atomic on one
filesystem, so a reader sees a whole entry or none; a worker killed mid-write
leaves only a folder in tmp/ that `gc` removes. When two runs finish the same
key, the second rename fails and that run simply adopts the first entry.
Entries are verified against their recorded digests when reused; a corrupt
one is moved to trash with a warning and rebuilt, never used. A file is re-hashed
only when its inode, size, modification or change time differ from when it was last
hashed (`.seen.json` in the entry, a hint outside the manifest): a fully cached run
reads file metadata, not 100 MB of models. `edgebuild cache verify` re-hashes all.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from edgebuild.core.artifact import UNTRUSTED, Artifact
from edgebuild.core.digest import digest_file

log = logging.getLogger(__name__)

MANIFEST = "artifact.json"
SEEN = ".seen.json"  # name -> the stat signature of the file when it last hashed right
CACHE_ENV = "EDGEBUILD_CACHE_DIR"


def default_cache_dir() -> Path:
    """$EDGEBUILD_CACHE_DIR, else the user cache folder (~/.cache/edgebuild on Linux)."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    import platformdirs

    return Path(platformdirs.user_cache_dir("edgebuild"))


class Store:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.objects = root / "objects"
        self.tmp = root / "tmp"
        self.trash = root / "trash"
        # Keys verified by this Store object: a run settles a stage more than once
        # (a search runs its plan in waves), and re-hashing large files each time adds up.
        self._verified: dict[str, Artifact] = {}

    def entry_dir(self, key: str) -> Path:
        if len(key) != 64:
            raise ValueError(f"cache keys are 64 hex digits, got {key!r}")
        return self.objects / key[:2] / key

    # -- reading -------------------------------------------------------------

    def peek(self, key: str) -> Artifact | None:
        """The entry's manifest without checking its files (for planning)."""
        manifest = self.entry_dir(key) / MANIFEST
        try:
            data = json.loads(manifest.read_text())
            return Artifact.from_json({**data, "path": str(manifest.parent)})
        except (OSError, ValueError, KeyError):
            return None

    def manifest(self, key: str) -> dict[str, Any] | None:
        """The entry's manifest as written (with its provenance), or None."""
        try:
            data = json.loads((self.entry_dir(key) / MANIFEST).read_text())
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def present(self, key: str) -> Artifact | None:
        """The entry if its manifest reads and every file is there at its recorded size:
        what `plan` shows as cached. A stat per file, no hashing (reuse verifies)."""
        artifact = self.peek(key)
        if artifact is None or artifact.untrusted:  # never served again (lookup drops it)
            return None
        for name, size in artifact.sizes.items():
            try:
                if (artifact.path / name).stat().st_size != size:
                    return None
            except OSError:
                return None
        return artifact

    def lookup(self, key: str) -> Artifact | None:
        """A verified entry, or None. A corrupt entry is discarded with a warning.

        Verified once per Store object: create a new one to verify again."""
        if key in self._verified:
            return self._verified[key]
        artifact = self.peek(key)
        if artifact is None:
            if self.entry_dir(key).exists():
                self._discard(key, "its manifest is missing or unreadable")
            return None
        if artifact.untrusted:  # the run that made it died before dropping it
            self.remove(key)
            return None
        problem = self.check(artifact)
        if problem:
            self._discard(key, problem)
            return None
        self._verified[key] = artifact
        return artifact

    def check(self, artifact: Artifact, rehash: bool = False) -> str:
        """'' when every file matches its recorded digest, else what is wrong. A file
        whose stat signature is the one it had when it last hashed right is not
        re-hashed (SEEN), unless `rehash`."""
        seen = {} if rehash else _read_seen(artifact.path / SEEN)
        hashed = False
        for name, expected in artifact.files.items():
            file = artifact.path / name
            if not file.is_file():
                return f"file {name} is missing"
            stat = file.stat()
            if stat.st_size != artifact.sizes.get(name):
                return f"file {name} has the wrong size"
            if seen.get(name) == stat_signature(stat):
                continue
            if digest_file(file) != expected:
                return f"file {name} does not match its recorded digest"
            seen[name] = stat_signature(stat)
            hashed = True
        if hashed:
            _write_seen(artifact.path, seen)
        return ""

    def entry_keys(self) -> Iterator[str]:
        """Every entry folder's key, readable manifest or not."""
        if not self.objects.is_dir():
            return
        for shard in sorted(self.objects.iterdir()):
            if shard.is_dir():
                for entry in sorted(shard.iterdir()):
                    if len(entry.name) == 64:
                        yield entry.name

    def entries(self) -> Iterator[Artifact]:
        """Every entry whose manifest reads (`entry_keys` for the others too)."""
        for key in self.entry_keys():
            artifact = self.peek(key)
            if artifact is not None:
                yield artifact

    # -- writing -------------------------------------------------------------

    def begin(self, key: str) -> Path:
        """A fresh private folder for a stage to write its output into."""
        work = self.tmp / f"{key}.{os.getpid()}.{uuid.uuid4().hex[:8]}"
        work.mkdir(parents=True)
        return work

    def commit(self, key: str, work: Path, fmt: str, metadata: dict[str, Any],
               provenance: dict[str, Any] | None = None) -> Artifact:
        """Digest the files in `work`, write the manifest, and publish it atomically.

        `provenance`: for an entry fetched from a shared store, where from and who
        signed it (kept in the manifest as "origin" and "signature", for `cache verify`)."""
        files: dict[str, str] = {}
        sizes: dict[str, int] = {}
        for file in sorted(p for p in work.rglob("*") if p.is_file()):
            name = file.relative_to(work).as_posix()
            if name == MANIFEST:
                continue
            files[name] = digest_file(file)
            sizes[name] = file.stat().st_size
        manifest = {
            "key": key, "format": fmt, "files": files, "sizes": sizes,
            "metadata": metadata, "created": time.time(), **(provenance or {}),
        }
        (work / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True))
        _write_seen(work, {name: stat_signature((work / name).stat()) for name in files})
        target = self.entry_dir(key)
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            work.rename(target)
        except OSError:
            # Another run published the same key first; theirs is as good as ours.
            shutil.rmtree(work, ignore_errors=True)
            existing = self.lookup(key)
            if existing is None:
                raise
            return existing
        published = Artifact.from_json({**manifest, "path": str(target)})
        self._verified[key] = published
        return published

    def trust(self, key: str, label_key: str, label: str) -> bool:
        """Serve an entry marked untrusted again, keeping why as `metadata[label_key]`: a
        latency figure timed under load that every gate reading it passed (load only
        slows). Atomic: the manifest is replaced whole. False when the entry is gone."""
        self._verified.pop(key, None)
        manifest = self.manifest(key)
        if manifest is None or not isinstance(manifest.get("metadata"), dict):
            return False
        metadata = manifest["metadata"]
        metadata.pop(UNTRUSTED, None)
        metadata[label_key] = label
        folder = self.entry_dir(key)
        fresh = folder / f".{MANIFEST}.{uuid.uuid4().hex[:8]}"
        fresh.write_text(json.dumps(manifest, indent=1, sort_keys=True))
        fresh.replace(folder / MANIFEST)
        return True

    def abandon(self, work: Path) -> None:
        shutil.rmtree(work, ignore_errors=True)

    def _discard(self, key: str, reason: str) -> None:
        log.warning("cache entry %s… is corrupt (%s); discarding it and rebuilding",
                    key[:12], reason)
        self.remove(key)

    def remove(self, key: str) -> None:
        # A run that removes an entry leaves the next one something to build: never
        # replayed (run/replay.py hears this).
        sys.audit("edgebuild.cache.remove", key)
        self._verified.pop(key, None)
        source = self.entry_dir(key)
        self.trash.mkdir(parents=True, exist_ok=True)
        doomed = self.trash / f"{key}.{uuid.uuid4().hex[:8]}"
        try:
            source.rename(doomed)
        except OSError:
            return  # already gone (another run discarded it)
        shutil.rmtree(doomed, ignore_errors=True)

    def clean_tmp(self, older_than_s: float = 3600.0) -> int:
        """Remove abandoned work folders (from killed workers) older than the limit."""
        removed = 0
        now = time.time()
        for folder in (self.tmp, self.trash):
            if not folder.is_dir():
                continue
            for item in folder.iterdir():
                if now - item.stat().st_mtime >= older_than_s:
                    shutil.rmtree(item, ignore_errors=True)
                    removed += 1
        return removed


def stat_signature(stat: os.stat_result) -> list[int]:
    """What changes when a file's content can have changed: a rewrite or a replacement
    changes the inode, size or times; the change time cannot be set back by a user."""
    return [stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns]


def _read_seen(path: Path) -> dict[str, list[int]]:
    try:
        found = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def _write_seen(folder: Path, seen: dict[str, list[int]]) -> None:
    """Atomically; a cache that cannot be written (read-only) just hashes again."""
    fresh = folder / f"{SEEN}.{uuid.uuid4().hex[:8]}"
    try:
        fresh.write_text(json.dumps(seen))
        fresh.replace(folder / SEEN)
    except OSError:
        with contextlib.suppress(OSError):
            fresh.unlink(missing_ok=True)
