"""Execute a plan: what is ready, what may start, and what to do with the results.

Rules, in order:
  * a stage is ready when every upstream stage produced an artifact;
  * a ready stage whose key is in the store (and verifies) is reused at once;
  * otherwise it becomes a task for the executor when its resources are free:
    one CPU slot, or -- for a measurement on this machine -- every slot (it runs
    alone, and nothing starts while it runs); a measurement also takes its
    device, a resource of capacity 1 (and the executor's cross-process lock);
  * on a failure, FAIL_FAST starts nothing new; KEEP_GOING still runs every
    stage that does not depend on the failed one.

A shared store (cache/shared.py), when given, is the second tier of both: a
local miss looks there, a local build is uploaded there; measurements never.

Only this module touches the store for a plan's results: an executor runs tasks
and never sees the cache, so a remote executor needs nothing but the tasks.
"""

from __future__ import annotations

import re
import time
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass
from pathlib import Path

from edgebuild.cache.shared import SharedStore
from edgebuild.cache.store import Store
from edgebuild.core.artifact import Artifact, stage_keys
from edgebuild.core.profile import RunnerKind
from edgebuild.core.stage_result import StageResult
from edgebuild.core.where import Where
from edgebuild.execute.executor import StageExecutor
from edgebuild.execute.policy import FailurePolicy
from edgebuild.execute.result import ExecutionResult, Outcome, Progress, StageRun
from edgebuild.execute.task import StageTask, TaskOutcome, device_of, stage_spec
from edgebuild.measure.record import malformed_record
from edgebuild.plan.planner import Plan
from edgebuild.plan.resolve import KeyResolver
from edgebuild.plan.stage import Stage

SLOTS = "slots"


@dataclass
class _Started:
    stage: Stage
    key: str
    work: Path
    log: Path
    needs: dict[str, int]
    perf: float


class Scheduler:
    def __init__(self, store: Store, executor: StageExecutor, logs_dir: Path,
                 policy: FailurePolicy = FailurePolicy.FAIL_FAST,
                 progress: Progress | None = None, shared: SharedStore | None = None) -> None:
        self.store = store
        self.shared = shared  # a second tier other machines fill (never measurements)
        self.executor = executor
        self.logs_dir = logs_dir
        self.policy = policy
        self.progress = progress or (lambda event, item: None)

    def execute(self, plan: Plan, resolver: KeyResolver) -> ExecutionResult:
        result = ExecutionResult()
        pending = {s.id: s for s in plan.order()}
        running: dict[Future[TaskOutcome], _Started] = {}
        used: dict[str, int] = {}
        keys: dict[str, str] = {}
        stop = False
        while pending or running:
            progressed = self._settle(pending, result, resolver, keys, stop)
            if not stop:
                for stage in self._startable(plan, pending, result, keys, used):
                    del pending[stage.id]
                    self.progress("start", stage)
                    future, started = self._submit(plan, stage, result, keys[stage.id])
                    running[future] = started
                    for name, amount in started.needs.items():
                        used[name] = used.get(name, 0) + amount
            if not running:
                if not progressed and pending:
                    for stage in list(pending.values()):  # cannot happen in a DAG
                        result.runs[stage.id] = StageRun(stage, Outcome.SKIPPED)
                        del pending[stage.id]
                continue
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                started = running.pop(future)
                for name, amount in started.needs.items():
                    used[name] -= amount
                run = self._finish(started, future)
                result.runs[run.stage.id] = run
                self.progress("end", run)
                if run.outcome is Outcome.FAILED and self.policy is FailurePolicy.FAIL_FAST:
                    stop = True
        return result

    def _settle(self, pending: dict[str, Stage], result: ExecutionResult,
                resolver: KeyResolver, keys: dict[str, str], stop: bool) -> bool:
        """Resolve stages that need no worker: cache hits and skips. True if any moved."""
        moved = True
        any_moved = False
        while moved:
            moved = False
            for stage in list(pending.values()):
                ups = [result.runs.get(u) for u in stage.upstream]
                if any(u is not None and u.artifact is None for u in ups):
                    failed = next(u for u in ups if u is not None and u.artifact is None)
                    if failed.outcome is Outcome.UNMEASURABLE:
                        # What could not be built here cannot be measured here either (a
                        # TensorRT engine without the GPU): the same verdict, for the policy.
                        run = StageRun(stage, Outcome.UNMEASURABLE, message=failed.message)
                    else:
                        run = StageRun(stage, Outcome.SKIPPED, message=f"not run: "
                                       f"'{failed.stage.id}' {failed.outcome.value}")
                elif stop:
                    run = StageRun(stage, Outcome.SKIPPED,
                                   message="not run: stopped after a failure (fail-fast)")
                elif all(u is not None for u in ups):
                    if stage.id in keys:
                        continue  # looked up before: a miss, waiting for resources
                    key = keys[stage.id] = resolver.key(stage, _inputs(stage, result))
                    artifact = self.store.lookup(key)
                    message = ""
                    if artifact is None and self.shared is not None and not stage.measures:
                        artifact = self.shared.fetch(key, self.store, stage.op)
                        message = f"from the shared cache {self.shared.url}"
                    if artifact is None:
                        continue
                    run = StageRun(stage, Outcome.CACHED, key=key, artifact=artifact,
                                   message=message)
                else:
                    continue
                del pending[stage.id]
                result.runs[stage.id] = run
                self.progress("end", run)
                moved = any_moved = True
        return any_moved

    def _needs(self, plan: Plan, stage: Stage) -> dict[str, int]:
        """The resources a stage holds while it runs."""
        if not stage.measures:
            return {SLOTS: 1}
        assert stage.target is not None
        on_this_machine = plan.recipe.targets[stage.target].runs_on.kind is RunnerKind.HOST
        # Timing this machine's CPU while other work shares it would time the other work.
        slots = self.executor.slots if on_this_machine else 1
        return {SLOTS: slots, f"device:{device_of(plan, stage)}": 1}

    def _startable(self, plan: Plan, pending: dict[str, Stage], result: ExecutionResult,
                   keys: dict[str, str], used: dict[str, int]) -> list[Stage]:
        """Ready stages, in plan order, whose resources fit beside what runs."""
        ready = [s for s in pending.values()
                 if s.id in keys and all(u in result.runs for u in s.upstream)]
        if not ready:
            return []  # asked only now: a remote executor connects on first need
        capacity = {SLOTS: self.executor.slots}
        taken = dict(used)
        chosen = []
        for stage in ready:
            needs = self._needs(plan, stage)
            if all(taken.get(r, 0) + n <= capacity.get(r, 1) for r, n in needs.items()):
                chosen.append(stage)
                for r, n in needs.items():
                    taken[r] = taken.get(r, 0) + n
        return chosen

    def _submit(self, plan: Plan, stage: Stage, result: ExecutionResult,
                key: str) -> tuple[Future[TaskOutcome], _Started]:
        log = self.logs_dir / f"{re.sub(r'[^A-Za-z0-9_.@#-]', '_', stage.id)}.log"
        work = self.store.begin(key)
        task = StageTask(stage.id, stage_spec(plan, stage, _inputs(stage, result), work), log,
                         device_of(plan, stage) if stage.measures else None,
                         *_placement(plan, stage))
        started = _Started(stage, key, work, log, self._needs(plan, stage), time.perf_counter())
        return self.executor.submit(task), started

    def _finish(self, started: _Started, future: Future[TaskOutcome]) -> StageRun:
        """The task's result as a StageRun; a built artifact is published to the store."""
        stage, key, log = started.stage, started.key, started.log
        seconds = time.perf_counter() - started.perf
        try:
            outcome = future.result()
        except Exception as exc:  # the executor itself broke, not the stage
            self.store.abandon(started.work)
            return StageRun(stage, Outcome.FAILED, seconds, key,
                            message=f"the executor could not run the stage: "
                                    f"{type(exc).__name__}: {exc}", log=log)
        done = outcome.result
        if done.status == "ok":  # a measurement's record is checked before it is stored
            assert done.format is not None
            wrong = malformed_record(done.format, done.metadata)
            if wrong:
                done = StageResult.error(
                    f"the stage returned a malformed {done.format} record: {wrong}",
                    "the worker runs another edgebuild version, or its device tool printed "
                    "what edgebuild cannot read; the stage's log says more")
        if done.status != "ok":
            self.store.abandon(started.work)
            kind = Outcome.UNMEASURABLE if done.status == "unmeasurable" else Outcome.FAILED
            return StageRun(stage, kind, seconds, key, message=done.why, hint=done.hint,
                            log=log, started=outcome.started, finished=outcome.finished,
                            worker=outcome.extra.get("worker", ""), metadata=done.metadata)
        assert done.format is not None and done.main is not None
        metadata = {**done.metadata, **stage_keys(done.main, stage.id, stage.op,
                                                  done.seconds or 0.0)}
        artifact = self.store.commit(key, started.work, done.format, metadata)
        if self.shared is not None and not stage.measures:
            self.shared.push(artifact)
        return StageRun(stage, Outcome.BUILT, seconds, key, artifact, log=log,
                        started=outcome.started, finished=outcome.finished,
                        worker=outcome.extra.get("worker", ""))


def _placement(plan: Plan, stage: Stage) -> tuple[
        str | None, tuple[str, str] | None, tuple[str, str] | None]:
    """The Dask resource tag, the SSH board (host, python) or the emulated board (arch,
    cpu) a stage must run on: the target's device, for the stages the planner placed
    there (`Stage.runs_on`)."""
    if stage.runs_on is not Where.DEVICE or stage.target is None:
        return None, None, None
    runs_on = plan.recipe.targets[stage.target].runs_on
    if runs_on.kind is RunnerKind.DASK:
        return runs_on.resource, None, None
    if runs_on.kind is RunnerKind.SSH:
        return None, (str(runs_on.host), runs_on.python), None
    if runs_on.kind is RunnerKind.EMULATED:
        return None, None, (str(runs_on.arch), runs_on.cpu or "")
    return None, None, None


def _inputs(stage: Stage, result: ExecutionResult) -> dict[str, Artifact]:
    inputs = {}
    for role, upstream in stage.inputs:
        artifact = result.runs[upstream].artifact
        assert artifact is not None
        inputs[role] = artifact
    return inputs


def run_plan(plan: Plan, resolver: KeyResolver, store: Store, executor: StageExecutor,
             logs_dir: Path, policy: FailurePolicy = FailurePolicy.FAIL_FAST,
             progress: Progress | None = None) -> ExecutionResult:
    """Execute `plan` on `executor` (the executor stays open for the caller's next plan)."""
    return Scheduler(store, executor, logs_dir, policy, progress).execute(plan, resolver)
