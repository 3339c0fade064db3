"""Reading what someone else wrote: a file that must be a regular file of bounded size,
and JSON parsed with limits.

Whoever can write a mirror, a device log or a registry's answer can put a FIFO where a
file belongs (reading it blocks forever), a device (`/dev/zero` never ends), a symlink
to a local file, a gigabyte where a kilobyte belongs, JSON nested 100,000 deep
(`json.loads` raises RecursionError, which no `except ValueError` catches), or a number
that is not finite (`1e999` parses to inf, and report.json's `Infinity` is not JSON).
These two helpers refuse each before the data is used, with a ValueError whose message
is one line; callers name the file and turn it into their own error.
"""

from __future__ import annotations

import math
import os
import stat
from pathlib import Path
from typing import Any, BinaryIO, Final

MAX_DEPTH: Final = 200  # pydantic-core's parser refuses deeper nesting ("recursion limit")


class Untrusted(ValueError):
    """Data from outside that is refused before it is used (the message is one line)."""


def read_regular(path: Path, limit: int, size: int | None = None) -> bytes:
    """The bytes of `path`, which must be a regular file (not a symlink, FIFO, device or
    folder) of at most `limit` bytes, or exactly `size` when given; checked on the open
    file before a byte is read (the open never blocks, even on a FIFO)."""
    with open_regular(path, limit, size) as reader:
        data = reader.read(limit + 1)
    if len(data) > limit:
        raise Untrusted(f"over the limit of {limit} bytes: refused")
    return data


def open_regular(path: Path, limit: int, size: int | None = None) -> BinaryIO:
    """`path` opened for reading, once it is known to be a regular file (not a symlink,
    FIFO, device or folder) of at most `limit` bytes (exactly `size` when given)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | \
        getattr(os, "O_CLOEXEC", 0)
    try:
        handle = os.open(path, flags)
    except OSError as exc:
        if Path(path).is_symlink():
            raise Untrusted("a symlink, refusing to read it") from None
        raise Untrusted(f"cannot be read ({exc.strerror or exc})") from None
    try:
        info = os.fstat(handle)
        if not stat.S_ISREG(info.st_mode):
            raise Untrusted(f"not a regular file ({_kind(info.st_mode)}), refusing to "
                            "read it")
        if size is not None and info.st_size != size:
            raise Untrusted(f"{info.st_size} bytes, not the {size} its descriptor says")
        if info.st_size > limit:
            raise Untrusted(f"{info.st_size} bytes, over the limit of {limit}: refused "
                            "unread")
        os.set_blocking(handle, True)
        return os.fdopen(handle, "rb")
    except BaseException:
        os.close(handle)
        raise


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a folder"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a file"


def loads(data: bytes | str, finite: bool = True) -> Any:
    """JSON from outside: nested at most MAX_DEPTH levels and, when `finite`, no
    NaN/Infinity literals and no number that overflows to infinity; Untrusted with the
    parser's one-line reason."""
    from pydantic_core import from_json

    try:
        value = from_json(data, allow_inf_nan=not finite)
    except ValueError as exc:
        why = str(exc).splitlines()[0] if str(exc) else "unreadable"
        if "recursion limit" in why:
            why = f"nested more than {MAX_DEPTH} levels deep ({why})"
        raise Untrusted(f"not JSON edgebuild reads: {why}") from None
    where = non_finite(value) if finite else ""
    if where:
        raise Untrusted(f"a number that is not finite at {where}")
    return value


def non_finite(value: Any, path: str = "$") -> str:
    """The JSON path of the first float in `value` that is not finite, or ''."""
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return where
        if isinstance(item, dict):
            stack.extend((v, f"{where}.{k}") for k, v in item.items())
        elif isinstance(item, list):
            stack.extend((v, f"{where}[{i}]") for i, v in enumerate(item))
    return ""
