"""ROOT/state.json: what the agent has active, what it had before, and why.

    ROOT/
      releases/<manifest hex>/   files/…, manifest.json, report.json, release.json
      current -> releases/<hex>  (a relative symlink, swapped atomically)
      state.json                 AgentState (written atomically, after every check)

`sequence` is the highest statement sequence the agent acted on — activated, renewed
or tried and rolled back — so neither an older nor a replayed statement is acted on
again (statement.py), and a release that failed its health check is not retried
until a newer promotion names it again.

The disk wins over state.json: every check starts by repairing the state from what
`releases/` holds and where `current` points (`repaired`): a release folder someone
removed is forgotten, the active release is the one `current` names, and a state file
that cannot be read is rebuilt from the releases' own release.json (its sequence the
highest they record). A repair never lowers the sequence.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import uuid
from pathlib import Path
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from edgebuild.core.untrusted import loads, read_regular
from edgebuild.errors import EdgebuildError
from edgebuild.fleet.records import DIGEST

STATE_NAME: Final = "state.json"
RELEASE_NAME: Final = "release.json"
MAX_EVENTS = 50
MAX_STATE = 16 << 20  # state.json and release.json: the agent's own, but read bounded

Action = Literal["activated", "renewed", "refused", "rolled-back",
                 "unhealthy", "repaired"]


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Release(_Record):
    """One release as the agent staged it (also releases/<hex>/release.json)."""

    version: str
    channel: str
    sequence: int
    index: str = Field(pattern=DIGEST)
    manifest: str = Field(pattern=DIGEST, description="the target's image manifest")
    folder: str = Field(pattern=r"^[0-9a-f]{64}$", description="releases/<folder>")
    target: str
    backend: str
    main: str
    downloaded_bytes: int = 0
    reused_bytes: int = 0
    engine: str = Field("", description="TensorRT: the shipped engine used, or built on "
                        "the device from the ONNX, and why (fleet/jetson.py)")


class Event(_Record):
    at: dt.datetime
    action: Action
    reason: str
    version: str | None = None
    sequence: int | None = None


class AgentState(_Record):
    schema_version: Literal[1] = 1
    target: str
    channel: str
    active: Release | None = None
    previous: Release | None = None
    sequence: int = Field(0, ge=0, description="highest statement sequence acted on")
    reason: str = Field("", description="why the active release is the active one")
    checked: dt.datetime | None = Field(None, description="the last check that found "
                                        "the channel unchanged")
    kept: list[str] = Field(default_factory=list, description="release folders on disk, "
                            "oldest first")
    events: list[Event] = Field(default_factory=list)

    def with_event(self, action: Action, note: str, version: str | None = None,
                   seq: int | None = None, /, **changes: object) -> AgentState:
        event = Event(at=dt.datetime.now(dt.UTC).replace(microsecond=0), action=action,
                      reason=note, version=version, sequence=seq)
        return self.model_copy(update={
            **changes, "events": [*self.events, event][-MAX_EVENTS:]})


def load_state(root: Path, target: str, channel: str) -> AgentState:
    """ROOT/state.json, repaired from the disk (`repaired`); a state file that cannot be
    read is rebuilt from the releases on disk and kept aside as state.json.broken."""
    path = root / STATE_NAME
    if not path.exists() and not path.is_symlink():
        return repaired(root, AgentState(target=target, channel=channel))
    try:
        state = AgentState.model_validate(loads(read_regular(path, MAX_STATE)))
    except (OSError, ValueError) as exc:
        detail = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else str(exc)
        with contextlib.suppress(OSError):
            path.replace(path.with_name(f"{STATE_NAME}.broken"))
        fresh = AgentState(target=target, channel=channel)
        return repaired(root, fresh.with_event(
            "repaired", f"{STATE_NAME} could not be read ({detail[:200]}): rebuilt from "
            f"the releases on disk (the old file is {STATE_NAME}.broken)"))
    if (state.target, state.channel) != (target, channel):
        raise EdgebuildError(f"{path} belongs to target {state.target!r} on channel "
                             f"{state.channel!r}, not {target!r} on {channel!r}",
                             "one --root per target and channel")
    return repaired(root, state)


def repaired(root: Path, state: AgentState) -> AgentState:
    """`state` made to agree with the disk: the releases kept are those in releases/, the
    active one is where `current` points, a previous one whose folder is gone is
    forgotten; each change is an event. The sequence never goes down."""
    on_disk = _releases(root)
    notes: list[str] = []
    linked = _current(root)
    active = on_disk.get(linked) if linked else None
    if active is None and state.active is not None:
        notes.append(f"the active release {state.active.version} is not on disk "
                     f"(releases/{state.active.folder[:12]}…, `current`)")
    elif active is not None and (state.active is None or state.active.folder != linked):
        notes.append(f"`current` names {active.version} (releases/{active.folder[:12]}…), "
                     f"not {state.active.version if state.active else 'nothing'}")
    elif active is not None and state.active is not None:
        active = state.active  # the same folder: state.json's record of it is the newer
    previous = state.previous
    if previous is not None and (previous.folder not in on_disk or
                                 (active is not None and previous.folder == active.folder)):
        if previous.folder not in on_disk:
            notes.append(f"the previous release {previous.version} is not on disk")
        previous = None
    kept = [k for k in state.kept if k in on_disk]
    gone = [k for k in state.kept if k not in on_disk]
    if gone:
        notes.append(f"{len(gone)} kept release folder(s) missing: "
                     + ", ".join(f"releases/{k[:12]}…" for k in gone))
    kept += sorted((k for k in on_disk if k not in kept),
                   key=lambda k: (on_disk[k].sequence, k))
    sequence = max([state.sequence, *(r.sequence for r in on_disk.values())])
    fixed = state.model_copy(update={"active": active, "previous": previous, "kept": kept,
                                     "sequence": sequence})
    if not notes:
        return fixed
    return fixed.with_event("repaired", "state repaired from the disk: " + "; ".join(notes))


def _releases(root: Path) -> dict[str, Release]:
    """releases/<hex>/ folders with a readable release.json (staging folders aside)."""
    found: dict[str, Release] = {}
    folder = root / "releases"
    if not folder.is_dir():
        return found
    for entry in folder.iterdir():
        if entry.name.startswith(".") or entry.is_symlink() or not entry.is_dir():
            continue
        try:
            release = Release.model_validate(loads(read_regular(entry / RELEASE_NAME,
                                                                MAX_STATE)))
        except (OSError, ValueError):
            continue
        if release.folder == entry.name:
            found[entry.name] = release
    return found


def _current(root: Path) -> str | None:
    """The release folder ROOT/current points at (releases/<hex>), or None."""
    link = root / "current"
    try:
        target = link.readlink()
    except OSError:
        return None
    if target.parent != Path("releases") or not (root / "releases" / target.name).is_dir():
        return None
    return target.name


def save_state(root: Path, state: AgentState) -> None:
    write_atomic(root / STATE_NAME, state.model_dump_json(indent=2) + "\n")


def write_atomic(path: Path, text: str) -> None:
    part = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        part.write_text(text)
        part.replace(path)
    finally:
        part.unlink(missing_ok=True)
