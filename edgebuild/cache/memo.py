"""Derived records kept beside the store: a pure function's result, by its inputs' digest.

A fully cached run builds nothing, yet it still judged every accuracy gate from two
stored outputs files: numpy imported and every figure computed again, each run, to the
same answer. A judgement is a pure function of those files (by content), the gate and
edgebuild's code, so it is kept here and read back:

    inputs (file digests, the gate, edgebuild_fingerprint()) ──digest──▶ key
    <cache>/memo/<kind>/<key[:2]>/<key>.json ◀── put(key, value)   get(key) ──▶ value | None

A record is written atomically (a temporary file renamed into place) and only when it
reads back equal to what was computed, so a value JSON cannot carry exactly (a tuple,
an integer dict key, a NaN) is never memoized. A record that does not read is recomputed,
never trusted; nothing here is needed for correctness, only for speed.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any, Generic, TypeVar

from edgebuild.cache.keys import edgebuild_fingerprint
from edgebuild.core.digest import digest_json

T = TypeVar("T")

MEMO_DIR = "memo"


class Memo(Generic[T]):
    """Values of one `kind` (a folder under <cache>/memo), typed by `of` (a pydantic model
    or a dataclass: validated on reading, never unpickled)."""

    def __init__(self, cache_root: Path, kind: str, of: Any) -> None:
        from pydantic import TypeAdapter

        self.folder = cache_root / MEMO_DIR / kind
        self._adapter: Any = TypeAdapter(of)

    @staticmethod
    def key(inputs: dict[str, Any]) -> str:
        """The digest of `inputs` (JSON) and of edgebuild's code: a code change is a miss."""
        return digest_json({"edgebuild": edgebuild_fingerprint(), "inputs": inputs})

    def _path(self, key: str) -> Path:
        return self.folder / key[:2] / f"{key}.json"

    def get(self, key: str) -> T | None:
        try:
            value: T = self._adapter.validate_json(self._path(key).read_bytes())
        except (OSError, ValueError):  # absent, unreadable or not a record: recompute
            return None
        return value

    def put(self, key: str, value: T) -> None:
        """Keep `value` when it reads back equal; a memo that cannot be written is skipped."""
        try:
            data = self._adapter.dump_json(value, warnings=False)
            if self._adapter.validate_json(data) != value:
                return
            path = self._path(key)
            path.parent.mkdir(parents=True, exist_ok=True)
            part = path.with_name(f".{path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}")
            part.write_bytes(data)
            part.replace(path)
        except (OSError, ValueError):
            return


def remembered(cache_root: Path | None, kind: str, of: Any, compute: Callable[[], T],
               inputs: dict[str, Any]) -> T:
    """`compute()`, or what it returned before for the same `inputs` (their JSON: file
    digests, never paths or times) and code; without a cache folder, simply `compute()`."""
    if cache_root is None:
        return compute()
    memo: Memo[T] = _memo(cache_root, kind, of)
    key = memo.key(inputs)
    found = memo.get(key)
    if found is None:
        found = compute()
        memo.put(key, found)
    return found


def remembered_value(cache_root: Path, kind: str, of: Any, inputs: dict[str, Any]
                     ) -> Any | None:
    """What `remember` kept for `inputs` (and this code), or None."""
    memo: Memo[Any] = _memo(cache_root, kind, of)
    return memo.get(memo.key(inputs))


def remember(cache_root: Path, kind: str, of: Any, inputs: dict[str, Any], value: Any) -> None:
    """Keep `value` for `inputs` (and this code): a record of a fact, not of a pure
    function; whoever reads it checks it still holds."""
    memo: Memo[Any] = _memo(cache_root, kind, of)
    memo.put(memo.key(inputs), value)


@cache
def _memo(cache_root: Path, kind: str, of: Any) -> Memo[Any]:
    return Memo(cache_root, kind, of)  # one per kind and run: a TypeAdapter takes a moment


def clean_memo(cache_root: Path, older_than: float) -> int:
    """Remove every memo record last written before `older_than` (a time.time())."""
    removed = 0
    folder = cache_root / MEMO_DIR
    if not folder.is_dir():
        return 0
    for record in folder.glob("*/*/*.json"):
        try:
            if record.stat().st_mtime < older_than:
                record.unlink()
                removed += 1
        except OSError:
            continue
    return removed
