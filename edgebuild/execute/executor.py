"""Execute a plan: topological order, cache reuse, parallel worker processes.

Scheduling rules, in order:
  * a stage is ready when every upstream stage produced an artifact;
  * a ready stage whose key is in the store (and verifies) is reused at once;
  * otherwise it runs in its own worker process, up to `jobs` at a time;
  * a measuring stage starts only when nothing else runs, and nothing starts
    while it runs (it also holds a cross-process device lock);
  * on a failure, FAIL_FAST starts nothing new; KEEP_GOING still runs every
    stage that does not depend on the failed one.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from edgebuild.cache.store import Store
from edgebuild.core.artifact import Artifact
from edgebuild.execute.locks import device_lock
from edgebuild.execute.policy import FailurePolicy
from edgebuild.execute.worker import QUIET_ENV
from edgebuild.plan.planner import Plan
from edgebuild.plan.resolve import KeyResolver
from edgebuild.plan.stage import Stage


class Outcome(StrEnum):
    CACHED = "cached"
    BUILT = "built"
    FAILED = "failed"
    SKIPPED = "skipped"  # an upstream stage failed, or fail-fast stopped the run
    UNMEASURABLE = "unmeasurable"


@dataclass
class StageRun:
    stage: Stage
    outcome: Outcome
    seconds: float = 0.0
    key: str | None = None
    artifact: Artifact | None = None
    message: str = ""
    hint: str = ""
    log: Path | None = None
    started: float = 0.0  # wall clock (time.time) when its worker started, 0 if none
    finished: float = 0.0


@dataclass
class ExecutionResult:
    runs: dict[str, StageRun] = field(default_factory=dict)

    def count(self, outcome: Outcome) -> int:
        return sum(1 for r in self.runs.values() if r.outcome is outcome)

    @property
    def failed(self) -> list[StageRun]:
        return [r for r in self.runs.values() if r.outcome is Outcome.FAILED]


Progress = Callable[[str, StageRun | Stage], None]


class LocalExecutor:
    def __init__(self, store: Store, logs_dir: Path, jobs: int = 1,
                 policy: FailurePolicy = FailurePolicy.FAIL_FAST,
                 progress: Progress | None = None) -> None:
        self.store = store
        self.logs_dir = logs_dir
        self.jobs = max(1, jobs)
        self.policy = policy
        self.progress = progress or (lambda event, item: None)

    def execute(self, plan: Plan, resolver: KeyResolver) -> ExecutionResult:
        result = ExecutionResult()
        order = plan.order()
        pending = {s.id: s for s in order}
        running: dict[Future[StageRun], Stage] = {}
        keys: dict[str, str] = {}
        stop = False
        with ThreadPoolExecutor(max_workers=self.jobs) as pool:
            while pending or running:
                progressed = self._settle(pending, result, resolver, keys, stop)
                if not stop:
                    for stage in self._startable(pending, result, running, keys):
                        del pending[stage.id]
                        self.progress("start", stage)
                        inputs = self._inputs(stage, result)
                        future = pool.submit(self._build, plan, stage, inputs, keys[stage.id])
                        running[future] = stage
                if not running:
                    if not progressed and pending:
                        for stage in list(pending.values()):  # cannot happen in a DAG
                            result.runs[stage.id] = StageRun(stage, Outcome.SKIPPED)
                            del pending[stage.id]
                    continue
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in done:
                    run = future.result()
                    del running[future]
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
                    run = StageRun(stage, Outcome.SKIPPED,
                                   message=f"not run: '{failed.stage.id}' {failed.outcome.value}")
                elif stop:
                    run = StageRun(stage, Outcome.SKIPPED,
                                   message="not run: stopped after a failure (fail-fast)")
                elif all(u is not None for u in ups):
                    inputs = self._inputs(stage, result)
                    if stage.id in keys:
                        continue  # looked up before: a miss, waiting for a worker
                    key = keys[stage.id] = resolver.key(stage, inputs)
                    artifact = self.store.lookup(key)
                    if artifact is None:
                        continue
                    run = StageRun(stage, Outcome.CACHED, key=key, artifact=artifact)
                else:
                    continue
                del pending[stage.id]
                result.runs[stage.id] = run
                self.progress("end", run)
                moved = any_moved = True
        return any_moved

    def _startable(self, pending: dict[str, Stage], result: ExecutionResult,
                   running: dict[Future[StageRun], Stage], keys: dict[str, str]) -> list[Stage]:
        ready = [s for s in pending.values()
                 if all(u in result.runs for u in s.upstream) and s.id in keys]
        if any(s.measures for s in running.values()):
            return []
        chosen: list[Stage] = []
        for stage in ready:
            if len(running) + len(chosen) >= self.jobs:
                break
            if stage.measures:
                if not running and not chosen:
                    return [stage]
                continue
            chosen.append(stage)
        return chosen

    @staticmethod
    def _inputs(stage: Stage, result: ExecutionResult) -> dict[str, Artifact]:
        inputs = {}
        for role, upstream in stage.inputs:
            artifact = result.runs[upstream].artifact
            assert artifact is not None
            inputs[role] = artifact
        return inputs

    def _build(self, plan: Plan, stage: Stage, inputs: dict[str, Artifact],
               key: str) -> StageRun:
        started = time.perf_counter()
        wall = time.time()
        log = self.logs_dir / f"{re.sub(r'[^A-Za-z0-9_.@#-]', '_', stage.id)}.log"
        work = self.store.begin(key)
        spec = stage_spec(plan, stage, inputs, work)
        try:
            if stage.measures:
                with device_lock(self.store.root, device_of(plan, stage)):
                    outcome = run_in_subprocess(spec, log, self.store.tmp)
            else:
                outcome = run_in_subprocess(spec, log, self.store.tmp)
        except BaseException:
            self.store.abandon(work)
            raise
        seconds = time.perf_counter() - started
        status = outcome.get("status")
        if status != "ok":
            self.store.abandon(work)
            kind = Outcome.UNMEASURABLE if status == "unmeasurable" else Outcome.FAILED
            return StageRun(stage, kind, seconds, key,
                            message=outcome.get("reason") or outcome.get("message", ""),
                            hint=outcome.get("hint", ""), log=log, started=wall,
                            finished=time.time())
        metadata = {**outcome["metadata"], "main": outcome["main"], "stage": stage.id,
                    "op": stage.op, "seconds": outcome["seconds"]}
        artifact = self.store.commit(key, work, outcome["format"], metadata)
        return StageRun(stage, Outcome.BUILT, seconds, key, artifact, log=log, started=wall,
                        finished=time.time())


def device_of(plan: Plan, stage: Stage) -> str:
    """The lock name of the device a measuring stage occupies."""
    assert stage.target is not None
    runs_on = plan.recipe.targets[stage.target].runs_on
    where = runs_on.host or runs_on.serial or runs_on.resource or "local"
    return f"{runs_on.kind.value}-{where}"


def stage_spec(plan: Plan, stage: Stage, inputs: dict[str, Artifact], out: Path) -> dict[str, Any]:
    """Everything a worker needs, as plain JSON: the stage's declared inputs and no more."""
    recipe = plan.recipe.recipe
    target = plan.recipe.targets[stage.target] if stage.target else None
    return {
        "stage_id": stage.id, "op": stage.op, "params": stage.params,
        "inputs": {role: a.to_json() for role, a in inputs.items()},
        "out": str(out), "recipe_dir": str(plan.recipe.base_dir),
        "io": {"inputs": [t.model_dump(mode="json") for t in recipe.inputs],
               "outputs": list(recipe.outputs)},
        "target": target.model_dump(mode="json") if target else None,
        "datasets": {name: recipe.datasets[name].model_dump(mode="json")
                     for name in stage.datasets},
        "source": recipe.model.model_dump(mode="json") if stage.uses_source else None,
    }


def run_in_subprocess(spec: dict[str, Any], log: Path, scratch: Path) -> dict[str, Any]:
    """Run one stage in a fresh Python process; a crash becomes a failed result."""
    log.parent.mkdir(parents=True, exist_ok=True)
    scratch.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=scratch, prefix="spec-") as folder:
        spec_path = Path(folder) / "spec.json"
        result_path = Path(folder) / "result.json"
        spec_path.write_text(json.dumps(spec))
        env = {**os.environ, **QUIET_ENV}
        with log.open("w") as handle:
            proc = subprocess.run(
                [sys.executable, "-m", "edgebuild.execute.worker", str(spec_path),
                 str(result_path)],
                stdout=handle, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                check=False,
            )
        if result_path.is_file():
            result: dict[str, Any] = json.loads(result_path.read_text())
            return result
    if proc.returncode < 0:
        name = signal.Signals(-proc.returncode).name
        message = f"the worker process was killed by {name}"
    else:
        message = f"the worker process exited with code {proc.returncode} without a result"
    return {"status": "error", "message": message,
            "hint": "a crash inside a converter or runtime; see the log"}
