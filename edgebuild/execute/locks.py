"""Cross-process device locks: one measurement per device at a time, across runs."""

from __future__ import annotations

import re
from pathlib import Path

from filelock import FileLock


def device_lock(folder: Path, device: str) -> FileLock:
    """The lock on `folder/<device>.lock` (an OS lock: released if its holder dies)."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", device)
    folder.mkdir(parents=True, exist_ok=True)
    return FileLock(folder / f"{safe}.lock")
