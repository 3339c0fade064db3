"""Cross-process device locks: one measurement per device at a time, across runs."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from filelock import FileLock


def device_lock(folder: Path, device: str) -> FileLock:
    """The lock on `folder/<device>.lock` (an OS lock: released if its holder dies).

    filelock (with the asyncio it imports) only here: a fully cached run takes no lock."""
    from filelock import FileLock

    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", device)
    folder.mkdir(parents=True, exist_ok=True)
    return FileLock(folder / f"{safe}.lock")
