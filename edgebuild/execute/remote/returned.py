"""What a remote worker (a Dask worker, an SSH board) sends back, checked before a byte
of it is written on the client.

A worker is not trusted (docs/security.md): its reply is a typed record, and every
file name in it goes through `core.paths.confined` first. Any bad name refuses the
whole reply, so a hostile worker cannot write outside the stage's own output
folder, and a half-written output never reaches the store:

    reply ── shape (WorkerReturn) ── every name confined to out/ ── Reply ── written
              any failure: RefusedReply, a one-line stage error; nothing of the reply written

A transport hands `transport.ship` a `Reply` only: a Dask worker's is checked here
(`check_reply`), an SSH board's tar by ssh.py's `read_reply`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, StrictBytes, StrictStr, ValidationError

from edgebuild.core.paths import confined
from edgebuild.core.stage_result import StageResult, first_error
from edgebuild.errors import EdgebuildError


@dataclass(frozen=True)
class Reply:
    """A far side's reply once checked: its typed result, its log, and its output files
    by the path each goes to (every name confined to the stage's output folder)."""

    result: StageResult
    log: str
    files: dict[Path, bytes]
    worker: str  # who ran it: a Dask worker's address, or ssh:HOST


class WorkerReturn(BaseModel):
    """`far_side.run_remote`'s reply: the stage's result, its output files by name, its log."""

    model_config = ConfigDict(extra="forbid")

    result: StageResult
    files: dict[StrictStr, StrictBytes]
    log: StrictStr
    worker: StrictStr


class RefusedReply(EdgebuildError):
    """A worker's reply that is malformed or names a file outside the stage's folder."""


def check_reply(raw: object, out: Path, who: str) -> Reply:
    """A Dask worker's reply (`far_side.run_remote`'s plain data) as a checked Reply, or
    RefusedReply. Nothing is written here: `transport.ship` writes only what passed.
    """
    try:
        reply = WorkerReturn.model_validate(raw)
    except ValidationError as exc:
        raise RefusedReply(f"refused the reply of worker {who}: malformed at "
                           f"{first_error(exc)}", "the worker runs another edgebuild version, "
                           "or is not a worker you trust") from None
    what = f"an output file name from worker {who}"
    try:
        paths = {confined(out, name, what): data for name, data in reply.files.items()}
        if reply.result.status == "ok":
            assert reply.result.main is not None  # StageResult._complete
            confined(out, reply.result.main, f"a main file name from worker {who}")
    except EdgebuildError as exc:
        raise RefusedReply(f"refused the reply of worker {who}: {exc.message}",
                           "nothing it sent was written; is this a worker you trust?") from None
    return Reply(reply.result, reply.log, paths, reply.worker)
