"""File digests remembered by (path, size, mtime), so re-planning does not rehash data."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from edgebuild.core.digest import digest_file


class StatCache:
    """Remembers file digests by (path, size, mtime) so re-planning does not rehash data.

    A digest is trusted only while size and nanosecond mtime are unchanged; the
    cache itself is a JSON file written atomically, so concurrent runs at worst
    recompute a digest.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._entries: dict[str, list[Any]] | None = None
        self._dirty = False

    def _load(self) -> dict[str, list[Any]]:
        if self._entries is None:
            try:
                self._entries = json.loads(self.path.read_text())
            except (OSError, ValueError):
                self._entries = {}
        return self._entries

    def digest(self, path: Path) -> str:
        resolved = path.resolve()
        stat = resolved.stat()
        entries = self._load()
        key = str(resolved)
        hit = entries.get(key)
        if hit and hit[0] == stat.st_size and hit[1] == stat.st_mtime_ns:
            return str(hit[2])
        value = digest_file(resolved)
        entries[key] = [stat.st_size, stat.st_mtime_ns, value]
        self._dirty = True
        return value

    def save(self) -> None:
        if not self._dirty or self._entries is None:
            return
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps(self._entries))
            tmp.replace(self.path)
        except OSError:
            return  # a read-only cache (`plan` on CI's restored cache): digests next time
        self._dirty = False
