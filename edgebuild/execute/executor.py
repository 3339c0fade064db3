"""The executor seam: where stage tasks run, behind one small protocol.

The scheduler (scheduler.py) decides *what* may start and *when*: readiness,
cache hits, failure policy, and device exclusivity as resources. An executor
only runs the picklable tasks it is handed (task.py) and returns futures, as
Kedro's runners differ only in the `concurrent.futures.Executor` they create:

    LocalExecutor   a worker process per task on this machine (local.py)
    (next)          a task per stage on a Dask cluster, device stages on workers
                    that carry the target's resource tag
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Protocol

from edgebuild.execute.task import StageTask, TaskOutcome


class StageExecutor(Protocol):
    @property
    def slots(self) -> int:
        """How many tasks it runs at once (the scheduler's CPU-slot capacity)."""

    def submit(self, task: StageTask) -> Future[TaskOutcome]:
        """Start `task`; the future never raises for a failing stage (see TaskOutcome)."""

    def shutdown(self) -> None:
        """Wait for running tasks and release workers."""
