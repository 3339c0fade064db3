"""`edgebuild cache verify`: is each entry whole, and — for one fetched from a shared
store — was it signed by a writer this machine trusts?

A locally built entry is checked against its digests only (the local cache is
this user's own). An entry with an "origin" came from a shared store: its
signature must verify over the manifest as stored (key, format, files, sizes,
metadata) and its writer must be trusted *now* (a key removed from the trusted
set takes its entries with it), unless it was fetched, and is now verified,
under `--shared-cache-trust any`.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from edgebuild.cache.signing import ANY, Signature, Trust, statement
from edgebuild.cache.store import Store


def verify_entry(store: Store, key: str, manifest: dict[str, Any] | None,
                 trust: Trust | None) -> str:
    """'' when the entry is sound, else what is wrong with it."""
    entry = store.peek(key)
    if entry is None or manifest is None:
        return "its manifest is missing or unreadable"
    problem = store.check(entry, rehash=True)
    if problem or "origin" not in manifest:
        return problem
    trust = trust or Trust()
    raw = manifest.get("signature")
    try:
        signature = Signature.model_validate(raw) if raw is not None else None
    except ValidationError:
        return "its signature is malformed"
    signed = None if signature is None else statement(
        key, entry.format, entry.files, entry.sizes, entry.metadata, signature.writer)
    why = trust.verify(signature, signed)
    if not why:
        return ""
    origin = manifest.get("origin")
    fetched_under_any = isinstance(origin, dict) and origin.get("trust") == ANY
    if trust.anyone and fetched_under_any and signature is None:
        return ""  # unsigned, fetched and verified under `any`: what the user chose
    if trust.anyone and signature is not None and why.startswith("its writer"):
        return ""
    where = origin.get("store", "?") if isinstance(origin, dict) else "?"
    return f"from shared store {where}: {why}"
