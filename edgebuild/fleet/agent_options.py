"""The agent's records: its options, its outcome, and `Refused` (a statement or blob
that failed verification: nothing is activated). Shared by agent.py and download.py."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict

from edgebuild.errors import EdgebuildError, ExitCode
from edgebuild.fleet.remote import FETCH_DEADLINE_S


class AgentOptions(BaseModel):
    model_config = ConfigDict(frozen=True)
    source: str
    channel: str
    target: str
    root: Path
    trust: list[Path]
    health_cmd: str | None = None
    model_check: bool = True
    keep: int = 3
    interval: float | None = None
    device_facts: Path | None = None  # TensorRT variants: the device's facts from a file
    adb: str | None = None  # push to an Android phone: its serial ("" = the only one)
    device_dir: str | None = None  # the phone's folder (default /data/local/tmp/edgebuild/C)
    fetch_deadline: float = FETCH_DEADLINE_S  # each read from a registry ends within it


class Refused(EdgebuildError):
    """A statement or blob failed verification: nothing is activated."""

    exit_code = ExitCode.STAGE_FAILED


class Outcome(BaseModel):
    model_config = ConfigDict(frozen=True)
    code: int
    message: str
