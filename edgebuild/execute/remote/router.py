"""Sends each stage task to where its device is: an SSH board over ssh, everything else
to the run's executor (local worker processes or a Dask cluster). A decorator of the
executor seam (executor.py): itself a StageExecutor around the run's own.

    scheduler ── task ──▶ DeviceRouter ─┬─ device absent ─▶ answered here (probe.py)
                                        ├─ task.ssh set ──▶ ship(SshTransport) (ssh.py)
                                        ├─ task.emulated ─▶ ship(EmulatedTransport) (emulated.py)
                                        └─ otherwise ────▶ LocalExecutor | DaskExecutor

A stage that first asks whether its device is here (`Op.probes`) is asked in this
process when the task would run on this machine (`probe_here`: local workers, no
ssh): a device that is not attached costs no worker process on a cached re-run.

A board runs one stage at a time: its tasks hold a cross-process lock named for
the device, as a local measurement does, so two runs never time it at once.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from edgebuild.execute.executor import StageExecutor
from edgebuild.execute.locks import device_lock
from edgebuild.execute.task import StageTask, TaskOutcome


class DeviceRouter:
    def __init__(self, base: StageExecutor, locks: Path, probe_here: bool = False) -> None:
        self.base = base
        self.locks = locks
        self.probe_here = probe_here  # the base runs tasks on this machine
        self._boards: ThreadPoolExecutor | None = None
        self._digests: dict[Path, str] = {}  # client file -> digest, hashed once per run

    @property
    def slots(self) -> int:
        return self.base.slots

    def submit(self, task: StageTask) -> Future[TaskOutcome]:
        if self.probe_here and task.ssh is None:
            from edgebuild.execute.remote.probe import absent_reason, answered

            reason = absent_reason(task)
            if reason is not None:
                return answered(task, reason)
        if task.ssh is None and task.emulated is None:
            return self.base.submit(task)
        if self._boards is None:
            self._boards = ThreadPoolExecutor(thread_name_prefix="edgebuild-board")
        return self._boards.submit(self._on_board, task)

    def _on_board(self, task: StageTask) -> TaskOutcome:
        from edgebuild.execute.remote.transport import ship

        if task.emulated is not None:
            from edgebuild.execute.remote.emulated import EmulatedTransport

            arch, cpu = task.emulated
            # One stage at a time: an emulated stage takes a core of this machine for minutes.
            with device_lock(self.locks, f"emulated-{arch}"):
                return ship(task, EmulatedTransport(arch, cpu), self._digests)
        from edgebuild.execute.remote.ssh import SshTransport

        assert task.ssh is not None
        host, python = task.ssh
        with device_lock(self.locks, f"ssh-{host}"):
            return ship(task, SshTransport(host, python), self._digests)

    def shutdown(self) -> None:
        if self._boards is not None:
            self._boards.shutdown(wait=True)
        self.base.shutdown()
