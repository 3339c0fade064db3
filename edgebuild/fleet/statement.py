"""The signed channel statement: "release X is channel C's, as of sequence N, until T".

    {"statement": "edgebuild-fleet-channel/1", "channel": "production",
     "version": "1.4.0", "index": "sha256:…", "index_size": 816,
     "sequence": 7, "issued": "2026-…Z", "expires": "2026-…Z"}

signed with Ed25519 over its canonical JSON (core/digest.py), by the keys of the
shared cache (cache/signing.py: the same key files, `edgebuild cache keygen`). As in
TUF, a device refuses a statement that is unsigned, signed by a key it does not
trust, expired (a freeze attack: an old statement served forever), or not newer than
the one it acts on (a rollback or replay): the sequence is monotonic per channel, so
a rollback is a *new* statement naming the old release. The trust root is the
device's key file; the layout never says whom to trust.

In the layout a statement is an artifact of its own (artifactType
application/vnd.edgebuild.channel-statement.v1) whose `subject` is the release's
index; the channel's tag points at it, and the spec's referrers fallback tag
`sha256-<index hex>` lists every statement about that release.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from edgebuild.cache.signing import Signature, Signer, Trust, read_public_keys, writer_id
from edgebuild.core.digest import canonical_json
from edgebuild.core.untrusted import loads
from edgebuild.errors import EdgebuildError, printable
from edgebuild.fleet.records import DIGEST

KIND: Final = "edgebuild-fleet-channel/1"
CHANNEL_NAME: Final = r"^[a-z][a-z0-9_-]{0,63}$"


class Statement(BaseModel):
    """What a promotion says; the exact bytes signed are its canonical JSON."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    statement: Literal["edgebuild-fleet-channel/1"] = KIND
    channel: str = Field(pattern=CHANNEL_NAME)
    version: str = Field(min_length=1, max_length=128)
    index: str = Field(pattern=DIGEST, description="the release's image index")
    index_size: int = Field(ge=1)
    sequence: int = Field(ge=1, description="monotonic per channel")
    issued: dt.datetime
    expires: dt.datetime

    def signed_bytes(self) -> bytes:
        return canonical_json(self.model_dump(mode="json")).encode("utf-8")


class SignedStatement(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    statement: Statement
    signature: Signature | None = None


def sign(statement: Statement, signer: Signer) -> SignedStatement:
    """`statement` with `signer`'s Ed25519 signature (cache/signing.py's key and record)."""
    import base64

    raw = signer.private.sign(statement.signed_bytes())
    return SignedStatement(statement=statement, signature=Signature(
        writer=signer.writer, public_key=base64.b64encode(signer.raw_public).decode(),
        signature=base64.b64encode(raw).decode()))


def parse(data: bytes, where: str) -> SignedStatement:
    """A statement blob, validated (not yet verified); EdgebuildError naming the key."""
    try:
        return SignedStatement.model_validate(loads(data))
    except ValueError as exc:
        if isinstance(exc, ValidationError):
            first = exc.errors()[0]
            key = ".".join(str(p) for p in first["loc"]) or "(top level)"
            raise EdgebuildError(f"{where}: statement key {printable(key)}: "
                                 f"{first['msg']}") from None
        raise EdgebuildError(f"{where}: the statement is {exc}") from None


def trust_from(files: list[Path]) -> Trust:
    """The keys a device trusts: only those in its key files (no default, no `any`)."""
    keys = [key for path in files for key in read_public_keys(path)]
    if not keys:
        raise EdgebuildError(f"no public key in {', '.join(map(str, files))}",
                             "one `ssh-ed25519 AAAA…` line per key the releases are "
                             "signed with (`edgebuild cache keygen` prints it)")
    return Trust({writer_id(k): k for k in keys})


def refusal(signed: SignedStatement, trust: Trust, channel: str,
            now: dt.datetime) -> str:
    """'' when `signed` is a valid statement about `channel` by a trusted key, in force
    at `now`; otherwise why it is refused (the sequence is the caller's to judge)."""
    why = trust.verify(signed.signature, signed.statement.signed_bytes())
    if why:
        return f"the statement is refused: {why}"
    statement = signed.statement
    if statement.channel != channel:
        return f"the statement is about channel {statement.channel!r}, not {channel!r}"
    if _utc(statement.expires) <= now:
        return (f"the statement expired at {statement.expires.isoformat()} (sequence "
                f"{statement.sequence}): promote again to renew it")
    if _utc(statement.issued) > now + dt.timedelta(minutes=10):
        return f"the statement was issued in the future ({statement.issued.isoformat()})"
    return ""


def _utc(moment: dt.datetime) -> dt.datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=dt.UTC)
