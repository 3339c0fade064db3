"""ROOT/state.json: what the agent has active, what it had before, and why.

    ROOT/
      releases/<manifest hex>/   files/…, manifest.json, report.json, release.json
      current -> releases/<hex>  (a relative symlink, swapped atomically)
      state.json                 AgentState (written atomically, after every check)

`sequence` is the highest statement sequence the agent acted on — activated, renewed
or tried and rolled back — so neither an older nor a replayed statement is acted on
again (statement.py), and a release that failed its health check is not retried
until a newer promotion names it again.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from pathlib import Path
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from edgebuild.errors import EdgebuildError
from edgebuild.fleet.records import DIGEST

STATE_NAME: Final = "state.json"
RELEASE_NAME: Final = "release.json"
MAX_EVENTS = 50

Action = Literal["activated", "renewed", "refused", "rolled-back",
                 "unhealthy"]


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
    path = root / STATE_NAME
    if not path.exists():
        return AgentState(target=target, channel=channel)
    try:
        state = AgentState.model_validate(json.loads(path.read_bytes()))
    except (OSError, ValueError) as exc:
        detail = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else str(exc)
        raise EdgebuildError(f"{path}: not a state file this agent wrote ({detail})",
                             "move it away to start over (the releases stay)") from None
    if (state.target, state.channel) != (target, channel):
        raise EdgebuildError(f"{path} belongs to target {state.target!r} on channel "
                             f"{state.channel!r}, not {target!r} on {channel!r}",
                             "one --root per target and channel")
    return state


def save_state(root: Path, state: AgentState) -> None:
    write_atomic(root / STATE_NAME, state.model_dump_json(indent=2) + "\n")


def write_atomic(path: Path, text: str) -> None:
    part = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        part.write_text(text)
        part.replace(path)
    finally:
        part.unlink(missing_ok=True)
