"""EmulatedTransport: a target's device stages on an emulated ARM board on this machine
(`runs_on: {kind: emulated, arch: aarch64, cpu: cortex-a72}`).

The board (boards/provision.py, `edgebuild board setup aarch64`) is an aarch64 Python
under qemu-user. It is reached exactly as an SSH board is (ssh.py), with the board's
Python in place of `ssh HOST PYTHON`, so the far side is the same code and the reply is
checked the same way::

    client ── tar on stdin: task.json + the stage's files ──▶
              BOARD/python -m edgebuild.execute.remote.ssh      (qemu-aarch64 -cpu CPU)
                └ run_remote: the stage in its own process, emulated too
    client ◀── result.json + the output files ─────────────────┘

The board runs this client's own edgebuild (its package folder is put on the board's
PYTHONPATH through a link), with the board's aarch64 wheels: the versions of this
environment, so an x86 and an ARM figure differ in their kernels, not in their code.
What it measures is real where the device's kernels decide it (outputs, hence accuracy
and INT8 fidelity); time is the emulator's and is never reported as the device's
(Target.emulated_reason).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from edgebuild.boards.provision import board_env, find_board
from edgebuild.core.stage_result import StageResult
from edgebuild.core.target import emulated_tag
from edgebuild.errors import EdgebuildError
from edgebuild.execute.remote.returned import RefusedReply, Reply
from edgebuild.execute.remote.ssh import BOARD, _exchange, _last, read_reply, task_payload

if TYPE_CHECKING:
    from edgebuild.execute.remote.carry import Carried
    from edgebuild.execute.remote.far_side import Files, Sources
    from edgebuild.execute.task import StageTask


class EmulatedTransport:
    """One emulated board: the task's tar on its Python's stdin, the reply on its stdout.
    Never `Lost`: a board that is not set up makes the stage "not measurable here"."""

    attempt = "the emulated board"

    def __init__(self, arch: str, cpu: str = "") -> None:
        self.arch, self.cpu = arch, cpu
        self.where = f"the emulated {arch} board"
        self.label = f"emulated:{arch}" + (f"/{cpu}" if cpu else "")

    def send(self, sources: Sources) -> Files:
        return {dest: (digest, path.read_bytes()) for dest, (digest, path) in sources.items()}

    def run(self, task: StageTask, carried: Carried, files: Files) -> Reply | StageResult:
        try:
            board = find_board(self.arch)
        except EdgebuildError as exc:
            return _unmeasurable(exc.message, exc.hint or "")
        if board is None:
            return _unmeasurable(f"no emulated {self.arch} board is set up on this machine",
                                 f"run `edgebuild board setup {self.arch}` (once per "
                                 "machine; docs/targets.md)")
        link = Path(tempfile.mkdtemp(prefix="edgebuild-board-"))
        try:
            _put_edgebuild(link)
            env = board_env({"PYTHONPATH": str(link), **({"QEMU_CPU": self.cpu}
                                                         if self.cpu else {})})
            returncode, stdout, stderr, problem = _exchange(
                [str(board.python), "-m", BOARD],
                task_payload(carried, files, emulated_tag(self.arch)), env)
        except OSError as exc:
            return _unmeasurable(f"cannot start the emulated {self.arch} board: {exc}",
                                 f"run `edgebuild board setup {self.arch}` again")
        finally:
            shutil.rmtree(link, ignore_errors=True)
        if problem:
            return StageResult.error(f"the stage on {self.where} {problem}")
        if not stdout:
            if returncode == 127:  # the script's qemu is gone
                return _unmeasurable(f"the emulated {self.arch} board cannot start: "
                                     f"{_last(stderr)}", "apt-get install qemu-user-static")
            return StageResult.error(f"{self.where} sent no result (exit {returncode}): "
                                     f"{_last(stderr)}")
        try:
            reply, outputs = read_reply(stdout, Path(task.spec["out"]))
        except EdgebuildError as exc:
            raise RefusedReply(f"refusing the reply of {self.where}: {exc.message}",
                               "nothing it sent was written") from None
        return Reply(reply.result, reply.log, outputs, self.label)

    def recover(self) -> bool:
        return False  # never Lost


def _put_edgebuild(folder: Path) -> None:
    """This client's edgebuild, importable from `folder` on the board: a link to its
    package, and its distribution's metadata (the registry reads its backends and passes
    from the entry points there). Another distribution's plugins are not on the board."""
    from importlib import metadata

    import edgebuild

    (folder / "edgebuild").symlink_to(Path(edgebuild.__file__).resolve().parent)
    dist = metadata.distribution("edgebuild")
    info = folder / f"edgebuild-{dist.version}.dist-info"
    info.mkdir()
    for name in ("METADATA", "entry_points.txt"):
        text = dist.read_text(name)
        if text is not None:
            (info / name).write_text(text)


def _unmeasurable(reason: str, hint: str) -> StageResult:
    return StageResult.unmeasurable(f"not measurable here: {reason}", hint)
