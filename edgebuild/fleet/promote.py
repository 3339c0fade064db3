"""`edgebuild promote oci-layout:DIR:V CHANNEL --key K`: sign "V is CHANNEL's" and move
the channel's tag to that statement (statement.py). Rollback is promoting the previous
release: a new statement with a higher sequence number, which every device accepts.

The sequence comes from what the signer controls, never from the store alone: the issue
time in milliseconds since the epoch, or one more than the channel's previous statement
when that one verifies against the signing key and is higher (two promotions in the
same millisecond, or a clock behind). So a fresh store — docs/fleet.md's CI publishes
to a new layout on every run — does not reset a fleet, and a store rewound by someone
without the key cannot lower the next sequence.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from edgebuild.cache.signing import Signer, Trust, signer_for
from edgebuild.errors import EdgebuildError
from edgebuild.fleet.layout import BlobError, Store
from edgebuild.fleet.records import (
    CHANNEL,
    CREATED,
    EMPTY,
    EMPTY_CONFIG,
    EMPTY_DATA,
    INDEX,
    MANIFEST,
    REF_NAME,
    SEQUENCE,
    STATEMENT_ARTIFACT,
    STATEMENT_LAYER,
    VERSION,
    Descriptor,
    ImageIndex,
    ImageManifest,
    canonical,
)
from edgebuild.fleet.statement import SignedStatement, Statement, parse, sign


def referrers_tag(digest: str) -> str:
    """The image-spec's referrers fallback tag of a subject: `sha256-<hex>`."""
    return digest.replace(":", "-")


def current(layout: Store, channel: str) -> SignedStatement | None:
    """The statement the channel's tag points at now, if any (unverified: `promote`
    uses its sequence only when it verifies against the signing key)."""
    descriptor = layout.lookup(channel)
    if descriptor is None:
        return None
    if descriptor.artifact_type != STATEMENT_ARTIFACT:
        raise EdgebuildError(f"{layout.where}: tag {channel!r} is not a channel (it names "
                             f"a {descriptor.artifact_type or descriptor.media_type})",
                             "channel names must differ from version tags")
    manifest = layout.manifest(descriptor)
    if not manifest.layers:
        raise EdgebuildError(f"{layout.where}: channel {channel!r}: statement has no layer")
    return parse(layout.read_blob(manifest.layers[0]), f"{layout.where}: channel {channel}")


MAX_EXPIRES_DAYS = 3660  # ten years: a statement that never expires defeats the expiry


def clock_sequence(moment: dt.datetime) -> int:
    """The sequence the issue time gives: milliseconds since the epoch (monotonic as long
    as the signer's clock is; `promote` also stays above a verified previous one)."""
    return max(1, int(moment.timestamp() * 1000))


def previous_sequence(layout: Store, channel: str, signer: Signer) -> int:
    """The sequence of the channel's current statement if it verifies against `signer`'s
    own key, else 0: an unsigned, foreign or unreadable statement in the store is
    ignored (anyone who can write the store could have put it there)."""
    try:
        before = current(layout, channel)
    except BlobError:
        return 0
    except EdgebuildError as exc:
        if "is not a channel" in exc.message:
            raise
        return 0
    if before is None or before.statement.channel != channel:
        return 0
    own = Trust({signer.writer: signer.raw_public})
    if own.verify(before.signature, before.statement.signed_bytes()):
        return 0
    return before.statement.sequence


def promote(layout: Store, version: str, channel: str, key: Path | None,
            expires_days: float, now: dt.datetime | None = None) -> SignedStatement:
    """Sign and store the statement putting release `version` on `channel`."""
    if not 0 < expires_days <= MAX_EXPIRES_DAYS:
        raise EdgebuildError(f"--expires-days {expires_days:g}: a number of days > 0 and "
                             f"at most {MAX_EXPIRES_DAYS} (ten years)",
                             "devices refuse an expired statement: promote again to "
                             "renew it before it expires")
    release = layout.resolve(version)
    if release.media_type != INDEX:
        raise EdgebuildError(f"{layout.where}: tag {version!r} is not a release (an image index)",
                             "promote a version that `edgebuild publish` wrote")
    layout.image_index(release)  # present and whole, or refused before anything is signed
    signer = signer_for(key)
    moment = now or dt.datetime.now(dt.UTC)
    issued = moment.replace(microsecond=0)
    sequence = max(clock_sequence(moment), previous_sequence(layout, channel, signer) + 1)
    try:
        statement = Statement(channel=channel, version=version, index=release.digest,
                              index_size=release.size, sequence=sequence,
                              issued=issued, expires=issued + dt.timedelta(days=expires_days))
    except ValueError as exc:
        raise EdgebuildError(f"channel {channel!r}: not a channel name ({exc})",
                             "lower-case letters, digits, - and _, starting with a "
                             "letter") from None
    signed = sign(statement, signer)
    blob = layout.put(STATEMENT_LAYER, canonical(signed.model_dump(mode="json")))
    layout.put(EMPTY, EMPTY_DATA)
    subject = Descriptor(media_type=INDEX, digest=release.digest, size=release.size)
    notes = {CHANNEL: channel, SEQUENCE: str(statement.sequence), VERSION: version,
             CREATED: issued.isoformat()}
    record = ImageManifest(artifact_type=STATEMENT_ARTIFACT, config=EMPTY_CONFIG,
                           layers=[blob], subject=subject, annotations=notes)
    described = layout.put_json(MANIFEST, record).model_copy(update={"annotations": notes})
    _add_referrer(layout, release, described)
    layout.tag(channel, described)
    return signed


def _add_referrer(layout: Store, subject: Descriptor, referrer: Descriptor) -> None:
    """Append to the subject's referrers fallback index (tag `sha256-<hex>`)."""
    tag = referrers_tag(subject.digest)
    tagged = layout.lookup(tag)
    listed = layout.image_index(tagged).manifests if tagged is not None else []
    index = ImageIndex(manifests=[*[d for d in listed if d.digest != referrer.digest],
                                  referrer])
    layout.tag(tag, layout.put_json(INDEX, index))


__all__ = ["REF_NAME", "current", "promote", "referrers_tag"]
