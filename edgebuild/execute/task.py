"""A stage as a picklable task: plain JSON in, plain JSON out.

The scheduler turns a ready stage into a `StageTask` (its spec names only the
stage's declared inputs); an executor runs it anywhere `run_stage` can run (a
local worker process today, a Dask worker next) and hands back a `TaskOutcome`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgebuild.core.artifact import Artifact
from edgebuild.core.share_cpu import SHARE_CPU_ENV, SHARING_ENV
from edgebuild.core.stage_result import StageResult
from edgebuild.execute.crash import crash_site
from edgebuild.execute.worker import PARENT_ENV, QUIET_ENV
from edgebuild.plan.planner import Plan
from edgebuild.plan.stage import Stage
from edgebuild.registry import load_op


@dataclass(frozen=True)
class StageTask:
    """Everything needed to run one stage, and the device it occupies (None: none)."""

    stage_id: str
    spec: dict[str, Any]  # JSON: op, params, inputs, io, target, declared datasets, source
    log: Path
    device: str | None = None  # measuring stages: the device they hold exclusively
    # The Dask resource tag of the worker it must run on (runs_on: {kind: dask}):
    # a target's measuring stages, and compile for a backend that compiles on the device.
    resource: str | None = None
    # (host, python) of the SSH board it must run on (runs_on: {kind: ssh}): the same
    # stages as for a Dask resource.
    ssh: tuple[str, str] | None = None
    # (arch, qemu cpu or "") of the emulated board it must run on (runs_on: {kind:
    # emulated}): the same stages again.
    emulated: tuple[str, str] | None = None


@dataclass
class TaskOutcome:
    """The stage's result (status ok | unmeasurable | error) and when it ran."""

    result: StageResult
    started: float = 0.0  # wall clock
    finished: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


def stage_spec(plan: Plan, stage: Stage, inputs: dict[str, Artifact], out: Path) -> dict[str, Any]:
    """Everything a worker needs, as plain JSON: the stage's declared inputs and no more."""
    recipe = plan.recipe.recipe
    target = plan.recipe.targets[stage.target] if stage.target else None
    return {
        "stage_id": stage.id, "op": stage.op, "params": stage.params,
        "inputs": {role: a.to_json() for role, a in inputs.items()},
        "out": str(out), "recipe_dir": str(plan.recipe.base_dir),
        "io": stage.io_declarations(recipe),
        "target": target.model_dump(mode="json") if target else None,
        "datasets": {name: recipe.datasets[name].model_dump(mode="json")
                     for name in stage.datasets},
        "source": recipe.model.model_dump(mode="json") if stage.uses_source else None,
        "custom_ops": {name: op.model_dump(mode="json")
                       for name, op in recipe.custom_ops.items()} if stage.custom_ops else None,
        "callable_params": [name for name in load_op(stage.op).callable_params
                            if stage.params.get(name)],
    }


def device_of(plan: Plan, stage: Stage) -> str:
    """The name of the device a measuring stage occupies (its lock, its resource)."""
    assert stage.target is not None
    runs_on = plan.recipe.targets[stage.target].runs_on
    where = runs_on.host or runs_on.serial or runs_on.resource or runs_on.arch or "local"
    return f"{runs_on.kind.value}-{where}"


def stage_env(share_cpu: bool, drop_env: tuple[str, ...] = (),
              extra_env: dict[str, str] | None = None) -> dict[str, str]:
    """A stage process's environment: this one's without `drop_env`, quiet vendors, the
    parent to die with, SHARING_ENV when `share_cpu` (an OpenMP wait policy the user
    set is kept), then `extra_env`."""
    drop = {*drop_env, SHARE_CPU_ENV}
    sharing = {k: v for k, v in SHARING_ENV.items()
               if share_cpu and (k == SHARE_CPU_ENV or k not in os.environ)}
    return {**{k: v for k, v in os.environ.items() if k not in drop}, **QUIET_ENV,
            **sharing, PARENT_ENV: str(os.getpid()), **(extra_env or {})}


def run_in_subprocess(spec: dict[str, Any], log: Path, scratch: Path,
                      extra_env: dict[str, str] | None = None,
                      drop_env: tuple[str, ...] = (),
                      timeout_s: float | None = None, where: str = "",
                      share_cpu: bool = False) -> StageResult:
    """Run one stage in a fresh Python process; a crash becomes a failed result.
    `drop_env`: variables of this process the stage must not inherit. `share_cpu`: a stage
    that times nothing gets SHARING_ENV (an OpenMP wait policy the user set is kept); any
    other stage runs with its runtimes' defaults. A stage still
    running after `timeout_s` is killed (SIGKILL) and fails, its message saying
    `where` (" on worker …"): a build never hangs."""
    log.parent.mkdir(parents=True, exist_ok=True)
    scratch.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=scratch, prefix="spec-") as folder:
        spec_path = Path(folder) / "spec.json"
        result_path = Path(folder) / "result.json"
        spec_path.write_text(json.dumps(spec))
        env = stage_env(share_cpu, drop_env, extra_env)
        with log.open("w") as handle:
            try:
                proc = subprocess.run(
                    [sys.executable, "-m", "edgebuild.execute.worker", str(spec_path),
                     str(result_path)],
                    stdout=handle, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                    env=env, check=False, timeout=timeout_s,
                )
            except subprocess.TimeoutExpired:  # run() killed it
                return StageResult.error(
                    f"the stage did not finish within {timeout_s:g} s{where}; its process "
                    "was killed", "a stage that is only slow needs a larger --stage-timeout "
                    "(docs/cli.md); the log shows how far it got")
        if result_path.is_file():
            return StageResult.parse(result_path.read_bytes(), f"the worker process{where}")
    if proc.returncode < 0:
        name = signal.Signals(-proc.returncode).name
        message = f"the worker process was killed by {name}"
    else:
        message = f"the worker process exited with code {proc.returncode} without a result"
    site = crash_site(log)
    return StageResult.error(message + (f" {site.where}" if site.where else ""),
                             "a crash inside a converter or runtime"
                             + (f"; the last thing it logged: {site.last}" if site.last else "")
                             + "; the stage's log has the rest")
