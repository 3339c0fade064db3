"""LocalExecutor: each stage task in a fresh worker process on this machine.

The process boundary is what lets a segfault inside a vendor converter fail one
stage instead of the run (task.run_in_subprocess). A measuring task also holds
a cross-process lock on its device, so two concurrent `edgebuild run`s never
time the same device at once (the scheduler already keeps one run's own
measurements apart); every other task shares the CPU (core/share_cpu.py).
"""

from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from edgebuild.execute.locks import device_lock
from edgebuild.execute.task import StageTask, TaskOutcome, run_in_subprocess


class LocalExecutor:
    def __init__(self, scratch: Path, locks: Path, jobs: int = 1,
                 stage_timeout_s: float | None = None) -> None:
        self.scratch = scratch
        self.stage_timeout_s = stage_timeout_s
        self.locks = locks
        self._slots = max(1, jobs)
        self._pool = ThreadPoolExecutor(max_workers=self._slots,
                                        thread_name_prefix="edgebuild-stage")

    @property
    def slots(self) -> int:
        return self._slots

    def submit(self, task: StageTask) -> Future[TaskOutcome]:
        return self._pool.submit(self._run, task)

    def _run(self, task: StageTask) -> TaskOutcome:
        started = time.time()
        if task.device is None:
            result = run_in_subprocess(task.spec, task.log, self.scratch,
                                       timeout_s=self.stage_timeout_s, share_cpu=True)
        else:
            with device_lock(self.locks, task.device):
                result = run_in_subprocess(task.spec, task.log, self.scratch,
                                           timeout_s=self.stage_timeout_s)
        return TaskOutcome(result, started, time.time())

    def shutdown(self) -> None:
        self._pool.shutdown(wait=True)
