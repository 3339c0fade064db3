"""Is the device here? Asked in the driver, before a worker process is started.

A stage that measures on (or builds for) a device first asks its backend whether
this machine can (`Op.probes`; `Backend.unmeasurable_reason`, `build_on_device`).
"No" is never cached: a phone may be plugged in before the next run. So on a fully
cached re-run those stages are the only work left, and each used to cost a worker
process and its imports to learn "no phone attached" again. The driver now asks
the backend's cheap `probe` first; only when it cannot tell does the stage run::

    scheduler ─ task ─▶ DeviceRouter ─ absent_reason(task) ─┬─ a reason ─▶ done: unmeasurable
                                                            └─ None ─────▶ a worker runs it

It applies only to tasks that would run on this machine (not over ssh, not on a
Dask cluster, whose workers may hold the device), where the probe's answer is the
one a local worker would give: both read the same environment. An emulated board's
latency is answered here too (the emulator's time is never the device's); its other
stages go to the board.
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import TYPE_CHECKING

from edgebuild.core.profile import RunnerKind
from edgebuild.core.target import Target
from edgebuild.errors import EdgebuildError
from edgebuild.registry import load_backend, load_op

if TYPE_CHECKING:
    from edgebuild.execute.task import StageTask, TaskOutcome

def absent_reason(task: StageTask) -> str | None:
    """The reason the task's stage would give for not measuring or building, when the
    backend can tell without a worker; None: run the stage."""
    purpose = load_op(task.spec["op"]).probes
    if not purpose or not task.spec.get("target"):
        return None
    target = Target.model_validate(task.spec["target"])
    if target.runs_on.kind is RunnerKind.EMULATED:  # the backend would ask this machine
        return target.emulated_reason(purpose) or None
    try:
        backend = load_backend(target.backend)
        asks_profile = bool((task.spec.get("params") or {}).get("profile"))
        if backend.capabilities.profiles_without_latency and asks_profile:
            return None  # `edgebuild profile`: the stage takes the profile it can (QNN's)
        return backend.probe(target, purpose)
    except EdgebuildError:
        return None  # the stage reports it, with its log, as it always did


def answered(task: StageTask, reason: str) -> Future[TaskOutcome]:
    """A finished task: unmeasurable for `reason`, with a log saying no worker ran."""
    from edgebuild.core.stage_result import StageResult
    from edgebuild.execute.task import TaskOutcome

    task.log.parent.mkdir(parents=True, exist_ok=True)
    task.log.write_text(f"{task.stage_id}: answered in the driver, no worker started "
                        f"(the device probe):\n{reason}\n")
    future: Future[TaskOutcome] = Future()
    # started 0: no worker ran it (report.json's `started`).
    future.set_result(TaskOutcome(StageResult.unmeasurable(reason), 0.0, 0.0))
    return future
