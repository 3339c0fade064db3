"""One remote stage, whatever carries it: carry → send → run → write back.

A stage run on a Dask worker (dask.py) and one run on an SSH board (ssh.py) take the
same steps; `ship` takes them once, and a `RemoteTransport` is only what differs,
how the files and the task travel:

    task ─ carry ─▶ send(sources) ─▶ files ─▶ run(task, carried, files) ─▶ Reply ─▶ written
           paths     Dask: scattered once      Dask: a task on a worker     typed, every
           become    per run, by content       ssh: one `ssh HOST PYTHON    name confined
           content   ssh: the bytes, read      -m edgebuild.execute.        (RefusedReply:
           (carry)                              remote.ssh`                  nothing written)
                     ▲                                │
                     └── Lost: that step again ───────┘  (at most RETRIES times each; after
                                                           `recover` when a worker died)

Neither a worker nor a board is trusted: a transport hands back a `Reply` only once its
result is a typed StageResult and every file name is confined to the stage's output
folder (returned.py), and nothing of a reply is written before then. What the far side
does is never an exception here: every failure is the stage's one-line result.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Protocol

from edgebuild.core.stage_result import StageResult
from edgebuild.errors import EdgebuildError
from edgebuild.execute.remote.carry import Carried, carry
from edgebuild.execute.remote.far_side import Files, Sources, task_files
from edgebuild.execute.remote.returned import RefusedReply, Reply
from edgebuild.execute.task import StageTask, TaskOutcome

RETRIES = 2  # a step whose worker died runs again at most this often, elsewhere


class Lost(Exception):
    """A step failed in a way another attempt may cure: a worker died, a connection
    dropped. `recover`: wait for the transport (`RemoteTransport.recover`) first."""

    def __init__(self, why: str, hint: str, recover: bool = True) -> None:
        super().__init__(why)
        self.why, self.hint, self.recover = why, hint, recover


class RemoteTransport(Protocol):
    """How a stage's files and task reach another machine and its reply comes back."""

    where: str  # "the cluster", "ssh host HOST": in "cannot send the stage's files to …"
    attempt: str  # "the Dask task": in "ran again after … failed"

    def send(self, sources: Sources) -> Files:
        """Each file's content where `run` can hand it over; Lost, or OSError (a file
        here that cannot be read)."""

    def run(self, task: StageTask, carried: Carried, files: Files) -> Reply | StageResult:
        """The stage run on the far side: its checked Reply, or the result of a failure
        (unreachable, timed out); Lost, or RefusedReply for a reply that fails a check."""

    def recover(self) -> bool:
        """After a Lost step: whether another attempt can be made (a worker is back)."""


def ship(task: StageTask, transport: RemoteTransport, digests: dict[Path, str],
         started: float | None = None) -> TaskOutcome:
    """Run `task` through `transport`: its result, log and output files come back here.
    `digests` caches the client files' digests across a run's tasks."""
    started = time.time() if started is None else started

    def ended(result: StageResult) -> TaskOutcome:
        return TaskOutcome(result, started, time.time())

    try:
        carried = carry(task.spec, digests)
        sources = task_files(carried.spec, carried.files)
    except (EdgebuildError, OSError) as exc:
        return ended(StageResult.error(f"cannot send the stage's files to {transport.where}: "
                                       f"{exc}"))
    failures: list[str] = []
    lost: Counter[str] = Counter()

    def again(step: str, exc: Lost) -> bool:
        failures.append(exc.why)
        lost[step] += 1
        return lost[step] <= RETRIES and (not exc.recover or transport.recover())

    while True:
        try:
            files = transport.send(sources)
        except Lost as exc:
            if again("send", exc):
                continue
            return ended(_gave_up(transport, failures, exc))
        except OSError as exc:
            return ended(StageResult.error(f"cannot send the stage's files to "
                                           f"{transport.where}: {exc}"))
        try:
            done = transport.run(task, carried, files)
        except Lost as exc:
            if again("run", exc):
                continue
            return ended(_gave_up(transport, failures, exc))
        except RefusedReply as exc:
            return ended(_refused(task, exc))
        if isinstance(done, StageResult):
            return ended(done)
        return _write_back(task, done, transport.attempt, failures, started)


def _gave_up(transport: RemoteTransport, failures: list[str], last: Lost) -> StageResult:
    return StageResult.error(f"{transport.attempt} failed {len(failures)} time(s), the last: "
                             f"{failures[-1]}", last.hint)


def _refused(task: StageTask, exc: RefusedReply) -> StageResult:
    """The stage's error; its log says why, and holds none of the far side's text."""
    try:
        task.log.parent.mkdir(parents=True, exist_ok=True)
        task.log.write_text(f"edgebuild: {exc.message}\n")
    except OSError:
        pass  # the error says it all
    return StageResult.error(exc.message, exc.hint)


def _write_back(task: StageTask, reply: Reply, attempt: str, failures: list[str],
                started: float) -> TaskOutcome:
    """Write a checked reply: its log (after why it ran again, if it did), then its files."""
    notes = "".join(f"edgebuild: ran again after {attempt} failed: {f}\n" for f in failures)
    try:
        task.log.parent.mkdir(parents=True, exist_ok=True)
        task.log.write_text(notes + reply.log)
        for path, data in reply.files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
    except OSError as exc:
        return TaskOutcome(StageResult.error(f"cannot write the outputs the worker sent: "
                                             f"{exc}"), started, time.time())
    extra: dict[str, object] = {"worker": reply.worker}
    if failures:
        extra["retried"] = failures
    return TaskOutcome(reply.result, started, time.time(), extra)
