"""Every write and delete edgebuild does is inside a folder it owns: --out or the cache.

Names from a recipe are validated where they are written (recipe/models.py:
SAFE_NAME); this is the second check at the one place a name becomes a path, so
a name that slipped through (a future field, a plugin) still cannot make `run`
delete or write outside --out.

Names from *outside* (a shared store's manifest, a Dask worker's result, an SSH
board's tar, metadata that names a file) go through `confined()` before the first
byte is written: a relative POSIX path of plain parts, then resolved inside its
folder. One helper, used by every source (docs/security.md).
"""

from __future__ import annotations

from pathlib import Path

from edgebuild.errors import EdgebuildError


def inside(root: Path, *parts: str, verb: str = "write") -> Path:
    """`root/parts...`, refused unless it resolves to a path strictly below `root`
    (`verb`: what the refusal says edgebuild would have done, "write" or "read")."""
    base = root.resolve()
    path = base.joinpath(*parts).resolve()
    if path == base or base not in path.parents or any("\x00" in p for p in parts):
        raise EdgebuildError(f"refusing to {verb} {'/'.join(parts)!r}: it is not inside {root}",
                             "names that become folders use letters, digits and _ . , = + -")
    return path


MAX_NAME = 255  # bytes in one path part on every filesystem edgebuild writes to
MAX_PATH = 1024


def confined(root: Path, name: str, what: str = "a file name", verb: str = "write") -> Path:
    """`root/name` for a `name` an untrusted party gave (a store, a worker, a board).

    Refused with an EdgebuildError, before anything is written, unless `name` is a
    relative POSIX path whose every part is a plain name (no '', '.', '..', no
    backslash, NUL or control character) and the result resolves strictly inside
    `root` (so a symlink already under `root` cannot lead out either).
    """
    if not isinstance(name, str):
        raise EdgebuildError(f"refusing {what} that is not a string: {name!r:.80}")
    parts = name.split("/")
    bad = (not name or len(name) > MAX_PATH or name.startswith("/")
           or any(p in ("", ".", "..") or len(p.encode()) > MAX_NAME for p in parts)
           or any(c == "\\" or ord(c) < 32 or c == "\x7f" for c in name))
    if bad:
        raise EdgebuildError(f"refusing {what} {name!r:.120}: not a plain relative path",
                             "names from a store, worker or board must stay inside "
                             "their folder")
    return inside(root, *parts, verb=verb)


def writable_dir(path: Path, what: str) -> Path:
    """`path` as a folder edgebuild can write to (made if missing), or a usage error that
    names it: a file, /dev/null or a read-only folder given as --out or --cache-dir is
    the user's mistake, found before any work starts."""
    import os
    import tempfile

    hint = f"point {what} at a folder you can write to"
    if path.exists() and not path.is_dir():
        raise EdgebuildError(f"{what} {path} is not a folder", hint)
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".edgebuild-probe-"):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise EdgebuildError(f"{what} {path} cannot be written: {reason}", hint) from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise EdgebuildError(f"{what} {path} cannot be written", hint)
    return path
