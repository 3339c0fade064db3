"""One remote sequence for every transport (execute/remote/transport.py `ship`): carry,
send, run, write back. A fake transport stands for a Dask worker or an SSH board: a
step that lost its worker runs again (at most RETRIES times, after `recover`), a refused
reply writes nothing of it, and a failure is the stage's one-line result, never an
exception."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from edgebuild.core.stage_result import StageResult
from edgebuild.execute.remote.carry import Carried
from edgebuild.execute.remote.dask import DaskTransport
from edgebuild.execute.remote.far_side import Files, Sources
from edgebuild.execute.remote.returned import RefusedReply, Reply
from edgebuild.execute.remote.ssh import SshTransport
from edgebuild.execute.remote.transport import RETRIES, Lost, RemoteTransport, ship
from edgebuild.execute.task import StageTask

OK = StageResult.ok("model.onnx", "onnx", {}, 0.1)


class Fake:
    """Replays `steps` for run: a Reply or StageResult to return, an exception to raise."""

    where = "the fake"
    attempt = "the fake task"

    def __init__(self, steps: list[Any], recovers: bool = True,
                 send_fails: int = 0) -> None:
        self.steps, self.recovers, self.send_fails = steps, recovers, send_fails
        self.sent: list[Sources] = []
        self.recovered = 0

    def send(self, sources: Sources) -> Files:
        self.sent.append(sources)
        if self.send_fails:
            self.send_fails -= 1
            raise Lost("cannot send the stage's files: gone", "send hint")
        return {dest: (digest, b"bytes") for dest, (digest, _) in sources.items()}

    def run(self, task: StageTask, carried: Carried, files: Files) -> Reply | StageResult:
        step = self.steps.pop(0)
        if isinstance(step, Exception):
            raise step
        assert isinstance(step, Reply | StageResult)
        return step

    def recover(self) -> bool:
        self.recovered += 1
        return self.recovers


@pytest.fixture
def task(tmp_path: Path) -> StageTask:
    (tmp_path / "project").mkdir()
    spec = {"stage_id": "s", "recipe_dir": str(tmp_path / "project"), "datasets": {},
            "inputs": {}, "source": None, "out": str(tmp_path / "out")}
    return StageTask("s", spec, tmp_path / "logs" / "s.log")


def reply(task: StageTask) -> Reply:
    out = Path(task.spec["out"])
    return Reply(OK, "far log\n", {out / "model.onnx": b"onnx"}, "far:1")


def test_both_transports_are_remote_transports() -> None:
    transports: list[RemoteTransport] = [SshTransport("board", "python3"),
                                         DaskTransport(lambda: None, 1.0, 1.0)]
    assert [t.where for t in transports] == ["ssh host board", "the cluster"]


def test_a_checked_reply_is_written_back(task: StageTask) -> None:
    outcome = ship(task, Fake([reply(task)]), {})
    assert outcome.result == OK
    assert outcome.extra == {"worker": "far:1"}
    assert task.log.read_text() == "far log\n"
    assert (Path(task.spec["out"]) / "model.onnx").read_bytes() == b"onnx"


def test_a_lost_worker_runs_the_step_again_and_the_log_says_why(task: StageTask) -> None:
    fake = Fake([Lost("KilledWorker: w1", "hint"), Lost("lost", "hint", recover=False),
                 reply(task)])
    outcome = ship(task, fake, {})
    assert outcome.result == OK
    assert outcome.extra["retried"] == ["KilledWorker: w1", "lost"]
    assert fake.recovered == 1  # only where the transport asked for it
    assert len(fake.sent) == 3  # the files go again: a dead worker took its copies
    assert task.log.read_text().splitlines()[:2] == [
        "edgebuild: ran again after the fake task failed: KilledWorker: w1",
        "edgebuild: ran again after the fake task failed: lost"]


def test_a_step_lost_too_often_fails_the_stage(task: StageTask) -> None:
    fake = Fake([Lost(f"death {n}", "workers died") for n in range(RETRIES + 1)])
    outcome = ship(task, fake, {})
    assert outcome.result.status == "error"
    assert outcome.result.message == (f"the fake task failed {RETRIES + 1} time(s), the "
                                      f"last: death {RETRIES}")
    assert outcome.result.hint == "workers died"
    assert not Path(task.spec["out"]).exists()


def test_no_recovery_no_retry(task: StageTask) -> None:
    fake = Fake([Lost("gone", "h")], recovers=False)
    assert ship(task, fake, {}).result.message == "the fake task failed 1 time(s), the " \
                                                  "last: gone"
    fake = Fake([], send_fails=RETRIES + 1)
    assert ship(task, fake, {}).result.message.startswith(
        f"the fake task failed {RETRIES + 1} time(s), the last: cannot send")


def test_a_refused_reply_writes_nothing_of_it(task: StageTask) -> None:
    refused = RefusedReply("refused the reply of worker w: not a plain relative path",
                           "is this a worker you trust?")
    outcome = ship(task, Fake([refused]), {})
    assert outcome.result.status == "error"
    assert outcome.result.message == refused.message
    assert task.log.read_text() == f"edgebuild: {refused.message}\n"
    assert not Path(task.spec["out"]).exists()


def test_a_failure_is_the_stages_result(task: StageTask) -> None:
    gone = StageResult.unmeasurable("not measurable here: cannot reach ssh host board")
    outcome = ship(task, Fake([gone]), {})
    assert outcome.result == gone and outcome.extra == {}


def test_files_that_cannot_be_carried_fail_the_stage(task: StageTask, tmp_path: Path) -> None:
    spec = {**task.spec, "datasets": {"d": {"kind": "npz", "path": "missing.npz"}}}
    outcome = ship(StageTask("s", spec, task.log), Fake([]), {})
    assert outcome.result.status == "error"
    assert outcome.result.message.startswith("cannot send the stage's files to the fake: ")
