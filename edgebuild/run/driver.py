"""The run driver: plan -> execute -> gates -> report, for `edgebuild run`.

It owns the one thing planning must not do: running. The plan stays an immutable
description; the run creates the executor once (the seam in execute/executor.py),
executes the plan (searches in waves, run/search.py), evaluates the gates from the
cached measurements, and writes the reports::

    LoadedRecipe ─ build_plan ─▶ Plan ─ Scheduler(LocalExecutor) ─▶ ExecutionResult
                                                  │ (searches: waves + select plan)
                          evaluate_target ◀───────┘
                                 ▼
                  Report ─▶ report.json, summary.md, junit.xml, report.html, artifacts/<target>/
"""

from __future__ import annotations

import datetime as dt
import os
import platform
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from edgebuild import __version__
from edgebuild.cache.store import Store
from edgebuild.core.paths import inside, writable_dir
from edgebuild.errors import ExitCode
from edgebuild.execute.policy import FailurePolicy
from edgebuild.plan.planner import Plan, build_plan, own_stages, select_targets
from edgebuild.plan.resolve import KeyResolver
from edgebuild.recipe.loader import LoadedRecipe

if TYPE_CHECKING:
    from edgebuild.execute.cluster import ClusterSpec
    from edgebuild.execute.executor import StageExecutor
    from edgebuild.execute.result import ExecutionResult, Progress
    from edgebuild.execute.scheduler import Scheduler
    from edgebuild.gates.result import GateResult
    from edgebuild.plan.planner import TargetStages
    from edgebuild.report.model import Report, SearchReport
    from edgebuild.run.search import SearchResult


@dataclass
class RunOptions:
    out: Path | None = None  # default: build/<recipe name>
    cache_dir: Path | None = None
    jobs: int = 1
    policy: FailurePolicy = FailurePolicy.FAIL_FAST
    progress: Progress | None = None  # called with ('start'|'end', stage or run)
    baseline: Path | None = None  # report.json of an earlier run: A/B latency comparison
    # A Dask cluster to run stages on: "local[:N]" or "tls://HOST:PORT" (or a parsed
    # ClusterSpec with TLS files); None: this machine's worker processes
    # ($EDGEBUILD_CLUSTER when the CLI does not say).
    cluster: str | ClusterSpec | None = None
    resource_timeout_s: float = 60.0  # how long a device stage waits for its worker
    targets: list[str] | None = None  # globs: build and gate only these targets
    shared_cache: str | None = None  # fsspec URL of a store other machines share


def make_executor(options: RunOptions, store: Store) -> StageExecutor:
    """The executor behind the seam: local worker processes, or a Dask cluster; SSH
    boards' stages go over ssh either way."""
    from edgebuild.devices.router import DeviceRouter

    base: StageExecutor
    if options.cluster:
        from edgebuild.execute.cluster import ClusterSpec, DaskExecutor

        spec = (options.cluster if isinstance(options.cluster, ClusterSpec)
                else ClusterSpec.parse(options.cluster))
        base = DaskExecutor(spec, options.resource_timeout_s)
    else:
        from edgebuild.execute.local import LocalExecutor

        base = LocalExecutor(store.tmp, store.root / "locks", options.jobs)
    return DeviceRouter(base, store.root / "locks")


def run_recipe(loaded: LoadedRecipe, options: RunOptions, cache_dir: Path) -> Report:
    """Build every target, evaluate gates, write the reports; returns the Report."""
    from edgebuild.execute.scheduler import Scheduler
    from edgebuild.run import search

    started_wall = dt.datetime.now(dt.UTC)
    started = time.perf_counter()
    out = writable_dir(options.out or Path("build") / loaded.recipe.name, "--out").resolve()
    writable_dir(cache_dir, "--cache-dir (or $EDGEBUILD_CACHE_DIR)")
    baselines = None
    if options.baseline is not None:
        from edgebuild.report.baseline import baseline_artifacts

        baselines = baseline_artifacts(options.baseline)
    only = select_targets(loaded, options.targets) if options.targets else None
    built = build_plan(loaded, baselines, only)
    store = Store(cache_dir)
    resolver = KeyResolver(built, store)
    # User mistakes in files and datasets surface here, before any work starts.
    if any(s.uses_source for s in built.order()):
        _ = resolver.source_digest
    for name in {d for s in built.order() for d in s.datasets}:
        resolver.dataset(name)

    shared = None
    if options.shared_cache:
        from edgebuild.cache.shared import SharedStore

        shared = SharedStore(options.shared_cache)
    executor = make_executor(options, store)

    def scheduler(progress: Progress) -> Scheduler:
        return Scheduler(store, executor, out / "logs", options.policy, progress, shared)

    try:
        execution, searches = search.execute(built, resolver, scheduler, options.progress,
                                             options.policy)
    finally:
        executor.shutdown()
    resolver.stats.save()
    report = _report(loaded, built, execution, out, started, started_wall, searches)
    write_reports(report, out)
    forget_noisy(report, built, execution, searches, store)
    return report


def forget_noisy(report: Report, built: Plan, execution: ExecutionResult,
                 searches: dict[str, SearchResult], store: Store) -> None:
    """Drop from the cache each latency figure a gate found too noisy to judge
    (`on_noisy: undecided`), so the next run measures again instead of repeating
    "undecided" from the cache forever (an unmeasurable figure is never cached either).

    Only the local cache: a `--shared-cache` keeps its copy (other machines read that
    store, so a run does not delete from it), and a later run may fetch it back.
    """
    judged = [(t.gates, built.targets[t.name]) for t in report.targets if t.search is None]
    judged += [(c.gates, c.stages) for s in searches.values() for c in s.candidates.values()]
    for gates, stages in judged:
        run = execution.runs.get(stages.latency or "")
        if run is not None and run.key and any(
                g.is_latency and "noisy" in g.details for g in gates):
            store.remove(run.key)


def _report(loaded: LoadedRecipe, built: Plan, execution: ExecutionResult, out: Path,
            started: float, started_wall: dt.datetime,
            searches: dict[str, SearchResult] | None = None) -> Report:
    from edgebuild.execute.result import Outcome
    from edgebuild.gates.evaluate import evaluate_target
    from edgebuild.report.model import Report, StageReport, TargetReport

    searches = searches or {}
    targets = []
    contained: set[str] = set()  # stages of candidates whose search still chose one
    owned = own_stages(built) if searches else {}
    for name, stages in built.targets.items():
        info = loaded.targets[name]
        entry = loaded.recipe.targets[name]
        outcome = searches.get(name)
        search_report = None
        if outcome is not None:
            gates, stages, search_report = _search_gates(name, outcome, execution, loaded)
            if outcome.chosen is not None:
                contained |= {sid for ids in owned[name].values() for sid in ids}
        else:
            gates = evaluate_target(name, entry.gates, stages, execution,
                                    loaded.recipe.policy_for(name))
        chosen = outcome is None or outcome.chosen is not None
        compiled = execution.runs[stages.compiled].artifact if chosen else None
        artifact_path = None
        destination = inside(out, "artifacts", name)
        if destination.exists():
            shutil.rmtree(destination)
        if compiled is not None:
            destination.mkdir(parents=True)
            for file in compiled.files:
                (destination / file).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(compiled.path / file, destination / file)
            artifact_path = str((destination / compiled.main.name).relative_to(out))
        targets.append(TargetReport(
            name=name, profile=info.profile.name, backend=info.backend,
            artifact=artifact_path, format=compiled.format if compiled else None,
            size_bytes=compiled.shipped_bytes if compiled else None,
            gates=gates, search=search_report,
            notes={file: (compiled.path / file).read_text()
                   for file in compiled.metadata.get("notes", [])} if compiled else {}))
    stage_reports = [StageReport(
        id=run.stage.id, op=run.stage.op, target=run.stage.target,
        inputs=run.stage.upstream, outcome=run.outcome.value,
        cached=run.outcome is Outcome.CACHED,
        seconds=round(run.seconds, 3), key=run.key,
        artifact_digest=run.artifact.digest if run.artifact else None,
        message=run.message, hint=run.hint, log=str(run.log) if run.log else None,
        started=run.started, finished=run.finished, worker=run.worker,
        metadata={k: v for k, v in (run.artifact.metadata if run.artifact else {}).items()
                  if k not in ("main", "stage", "op", "conditions")},
    ) for run in (execution.runs[s.id] for s in built.order())]
    if any(r.stage.id not in contained for r in execution.failed):
        code = ExitCode.STAGE_FAILED
    elif not all(all(t.gates) for t in targets):
        code = ExitCode.GATE_FAILED
    else:
        code = ExitCode.OK
    counts = {o.value: execution.count(o) for o in Outcome}
    return Report(
        recipe=loaded.recipe.name, recipe_file=str(loaded.path), edgebuild_version=__version__,
        started=started_wall.isoformat(timespec="seconds"),
        seconds=round(time.perf_counter() - started, 3), exit_code=int(code),
        stages=stage_reports, targets=targets, counts=counts,
        machine={"platform": platform.platform(), "machine": platform.machine(),
                 "cores": os.cpu_count()})


def _search_gates(name: str, outcome: SearchResult, execution: ExecutionResult,
                  loaded: LoadedRecipe) -> tuple[list[GateResult], TargetStages, SearchReport]:
    """A search target's gates: the chosen candidate's, as the target's, plus `search`."""
    from edgebuild.gates.evaluate import evaluate_target
    from edgebuild.gates.result import GateResult, GateStatus
    from edgebuild.report.search import search_report
    from edgebuild.run.search import CandidateState

    entry = loaded.recipe.targets[name]
    policy = loaded.recipe.policy_for(name)
    if outcome.chosen is not None:
        stages = outcome.candidates[outcome.chosen].stages
        gates = evaluate_target(name, entry.gates, stages, execution, policy)
        status = GateStatus.PASSED
    else:
        first = next(iter(outcome.candidates.values()))
        stages = first.stages
        gates = []
        states = {c.state for c in outcome.candidates.values()}
        status = GateStatus.FAILED
        if states == {CandidateState.UNMEASURABLE}:
            status = GateStatus.UNMEASURABLE
        elif not states & {CandidateState.REJECTED, CandidateState.UNMEASURABLE}:
            status = GateStatus.NOT_RUN
    fails = status is not GateStatus.PASSED and not (
        status is GateStatus.UNMEASURABLE and policy.unmeasurable.value == "warn")
    report = search_report(outcome, execution, loaded)
    gates.append(GateResult(
        target=name, gate="search", status=status, counts_as_failure=fails,
        measured={"candidates": len(outcome.candidates), "passed": len(outcome.passing)},
        details={"chosen": outcome.chosen}, message=outcome.message))
    return gates, stages, report


def write_reports(report: Report, out: Path) -> None:
    from edgebuild.report.html import html_page
    from edgebuild.report.render import junit, markdown

    for name, text in (("report.json", report.model_dump_json(indent=2)),
                       ("summary.md", markdown(report)), ("junit.xml", junit(report)),
                       ("report.html", html_page(report))):
        tmp = out / f".{name}.tmp"
        tmp.write_text(text)
        tmp.replace(out / name)
