"""Cross-process device locks: one measurement per device at a time, across runs."""

from __future__ import annotations

import fcntl
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def device_lock(root: Path, device: str) -> Iterator[None]:
    """Hold an exclusive flock on `root/locks/<device>.lock` (released if we die)."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", device)
    path = root / "locks" / f"{safe}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
