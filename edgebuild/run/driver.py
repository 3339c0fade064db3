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
import logging
import os
import platform
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from edgebuild import __version__
from edgebuild.cache.store import Store
from edgebuild.core.artifact import UNDER_LOAD, UNTRUSTED
from edgebuild.core.paths import writable_dir
from edgebuild.errors import EdgebuildError, ExitCode
from edgebuild.execute.policy import FailurePolicy
from edgebuild.plan.planner import Plan, build_plan, own_stages, select_targets
from edgebuild.plan.resolve import KeyResolver
from edgebuild.recipe.loader import LoadedRecipe

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from edgebuild.core.artifact import Artifact
    from edgebuild.execute.cluster import ClusterSpec
    from edgebuild.execute.executor import StageExecutor
    from edgebuild.execute.result import ExecutionResult, Progress
    from edgebuild.execute.scheduler import Scheduler
    from edgebuild.gates.result import GateResult
    from edgebuild.passes.onnx_metadata import ModelMetadata
    from edgebuild.plan.planner import TargetStages
    from edgebuild.report.model import Report, SearchReport
    from edgebuild.run.search import SearchResult


@dataclass
class RunOptions:
    out: Path | None = None  # default: build/<recipe name>
    cache_dir: Path | None = None
    jobs: int = 1
    policy: FailurePolicy = FailurePolicy.FAIL_FAST
    progress: Progress | None = None  # ('planned', plan), then ('start'|'end', stage or run)
    baseline: Path | None = None  # report.json of an earlier run: A/B latency comparison
    # A Dask cluster to run stages on: "local[:N]" or "tls://HOST:PORT" (or a parsed
    # ClusterSpec with TLS files); None: this machine's worker processes
    # ($EDGEBUILD_CLUSTER when the CLI does not say).
    cluster: str | ClusterSpec | None = None
    resource_timeout_s: float = 60.0  # how long a device stage waits for its worker
    # A stage still running after this is killed and fails (--stage-timeout); on a
    # cluster, a task with no reply by then plus cluster.REPLY_GRACE_S fails too.
    stage_timeout_s: float = 6 * 3600.0
    targets: list[str] | None = None  # globs: build and gate only these targets
    shared_cache: str | None = None  # fsspec URL of a store other machines share
    # Whose entries to accept: public-key files, or "any" (docs/distributed.md);
    # [] reads $EDGEBUILD_SHARED_CACHE_TRUST. The reader's own key is always trusted.
    shared_cache_trust: list[str] = field(default_factory=list)
    shared_cache_key: Path | None = None  # the writer's key (default: made in ~/.config)
    # `edgebuild profile` (run/profile.py): plan each target's chain, compile and a
    # profiling measure-latency only (plan/planner.py build_plan's `profiling`).
    profiling: bool = False


def make_executor(options: RunOptions, store: Store) -> StageExecutor:
    """The executor behind the seam: local worker processes, or a Dask cluster; SSH
    boards' stages go over ssh either way."""
    from edgebuild.execute.remote.router import DeviceRouter

    base: StageExecutor
    if options.cluster:
        from edgebuild.execute.cluster import ClusterSpec, DaskExecutor

        spec = (options.cluster if isinstance(options.cluster, ClusterSpec)
                else ClusterSpec.parse(options.cluster))
        base = DaskExecutor(spec, options.resource_timeout_s, options.stage_timeout_s)
    else:
        from edgebuild.execute.local import LocalExecutor

        base = LocalExecutor(store.tmp, store.root / "locks", options.jobs,
                             options.stage_timeout_s)
    # Local workers read this machine, as the driver does: it may answer "no device here"
    # itself. A cluster's workers may hold the device, so there the stage asks.
    return DeviceRouter(base, store.root / "locks", probe_here=not options.cluster)


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

        baselines = baseline_artifacts(options.baseline, {
            name: info.backend for name, info in loaded.targets.items()})
    only = select_targets(loaded, options.targets) if options.targets else None
    built = build_plan(loaded, baselines, only, options.profiling)
    if options.progress is not None:
        options.progress("planned", built)
    store = Store(cache_dir)
    resolver = KeyResolver(built, store)
    # User mistakes in files and datasets surface here, before any work starts.
    if any(s.uses_source for s in built.order()):
        _ = resolver.source_digest
    for name in {d for s in built.order() for d in s.datasets}:
        resolver.dataset(name)
    import_baselines(built, resolver, store)

    shared = None
    if options.shared_cache:
        from edgebuild.cache.shared import shared_store

        shared = shared_store(options.shared_cache, options.shared_cache_trust,
                              options.shared_cache_key)
    executor = make_executor(options, store)

    def scheduler(progress: Progress) -> Scheduler:
        return Scheduler(store, executor, out / "logs", options.policy, progress, shared)

    try:
        with quiet_wait(store, options.progress is not None):
            execution, searches = search.execute(built, resolver, scheduler,
                                                 options.progress, options.policy)
    finally:
        executor.shutdown()
    resolver.stats.save()
    report = _report(loaded, built, execution, out, started, started_wall, searches, store)
    forget_noisy(report, built, execution, searches, store)
    write_reports(report, out)
    return report


def import_baselines(built: Plan, resolver: KeyResolver, store: Store) -> None:
    """Put each `import-baseline` stage's artifact into the store here, before the run, so
    the stage is a cache hit wherever stages run: the manifest's paths are this machine's,
    and a remote worker gets the files as the comparison's input artifact, by content."""
    from edgebuild.measuring.import_baseline import ImportParams, import_build

    for stage in built.order():
        if stage.op != "import-baseline" or stage.target is None:
            continue
        key = resolver.key(stage, {})
        if store.lookup(key) is not None:
            continue
        work = store.begin(key)
        try:
            done = import_build(ImportParams.model_validate(stage.params),
                                built.recipe.targets[stage.target].backend, work)
        except BaseException:
            store.abandon(work)
            raise
        store.commit(key, work, done.format, {**done.metadata, "main": done.main,
                                              "stage": stage.id, "op": stage.op})


@contextmanager
def quiet_wait(store: Store, show: bool) -> Iterator[None]:
    """One budget for the whole run's waiting for the machine to quieten before timing
    (measure/quiet.py), and, when progress is shown, this terminal for what it says."""
    from edgebuild.measure.quiet import CONSOLE_ENV, LEDGER_ENV, WaitBudget

    ledger = store.tmp / f"quiet-wait.{os.getpid()}.json"
    WaitBudget.create(ledger)
    saved = {name: os.environ.get(name) for name in (LEDGER_ENV, CONSOLE_ENV)}
    os.environ[LEDGER_ENV] = str(ledger)
    console = Path(f"/proc/{os.getpid()}/fd/2")
    if show and console.exists():  # the workers' own stderr is their log
        os.environ[CONSOLE_ENV] = str(console)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        ledger.unlink(missing_ok=True)


def notes_of(compiled: Artifact) -> dict[str, str]:
    """The backend's notes files, shown in every report: only files of the artifact
    itself (Artifact.named), so an entry's metadata cannot read another local file
    into summary.md or report.html; a refused name costs a warning."""
    notes: dict[str, str] = {}
    for name in compiled.metadata.get("notes") or []:
        try:
            notes[str(name)] = compiled.named(name, "a notes file").read_text(
                errors="replace")
        except (EdgebuildError, OSError) as exc:
            log.warning("%s: skipping a note: %s", compiled.metadata.get("stage", "compile"),
                        exc)
    return notes


def model_metadata_of(built: Plan, execution: ExecutionResult) -> ModelMetadata | None:
    """The model's own metadata as the import-onnx stage read it (a plan has at most one:
    every target of an ONNX source descends from it). None for a PyTorch source, or when
    the (cached, maybe shared) entry holds no valid one."""
    from pydantic import ValidationError

    from edgebuild.passes.onnx_metadata import ModelMetadata

    for stage in built.order():
        if stage.op != "import-onnx":
            continue
        run = execution.runs.get(stage.id)
        found = run.artifact.metadata.get("model") if run and run.artifact else None
        try:
            return ModelMetadata.model_validate(found) if found else None
        except ValidationError:
            log.warning("%s: ignoring its model metadata (not valid)", stage.id)
    return None


def forget_noisy(report: Report, built: Plan, execution: ExecutionResult,
                 searches: dict[str, SearchResult], store: Store) -> None:
    """Settle what the cache keeps of each figure timed under load (issue 38).

    A latency or throughput figure its stage marked untrusted (others took the CPU while
    timing) that every gate reading it *passed* is a valid pass — load only slows — so it
    is kept, labelled `under_load`, and a re-run does not time it again. One that missed,
    or that a gate found too noisy to judge (`on_noisy: undecided`), is dropped, so the
    next run measures again instead of repeating a busy machine's figure from the cache
    forever (the store refuses to serve an entry still marked untrusted, too, should a
    run die before this). The report's stage metadata says which of the two happened.

    Only the local cache: a `--shared-cache` keeps its copy (other machines read that
    store, so a run does not delete from it), and a later run may fetch it back.
    """
    from edgebuild.gates.result import GateStatus

    judged = [(t.gates, built.targets[t.name]) for t in report.targets if t.search is None]
    judged += [(c.gates, c.stages) for s in searches.values() for c in s.candidates.values()]
    stages = {s.id: s for s in report.stages}
    for gates, target in judged:
        for stage_id, reads in ((target.latency, _reads_latency),
                                (target.throughput, _reads_throughput)):
            run = execution.runs.get(stage_id or "")
            if run is None or not run.key:
                continue
            mine = [g for g in gates if reads(g)]
            noisy = any("noisy" in g.details for g in mine)
            untrusted = run.artifact.untrusted if run.artifact is not None else ""
            if not (untrusted or noisy):
                continue
            shown = stages.get(run.stage.id)
            if (untrusted and not noisy and mine
                    and all(g.status is GateStatus.PASSED for g in mine)):
                label = (f"timed under load, kept: {untrusted.removeprefix('not cached: ')}; "
                         "every gate on it passed (load only slows)")
                if store.trust(run.key, UNDER_LOAD, label) and shown is not None:
                    shown.metadata.pop(UNTRUSTED, None)
                    shown.metadata[UNDER_LOAD] = label
            else:
                store.remove(run.key)



def _reads_latency(gate: GateResult) -> bool:
    return gate.is_latency or gate.gate == "memory"


def _reads_throughput(gate: GateResult) -> bool:
    return gate.gate == "throughput"


def _report(loaded: LoadedRecipe, built: Plan, execution: ExecutionResult, out: Path,
            started: float, started_wall: dt.datetime,
            searches: dict[str, SearchResult] | None = None,
            store: Store | None = None) -> Report:
    from edgebuild.execute.result import Outcome
    from edgebuild.gates.evaluate import evaluate_target
    from edgebuild.measure.profiled import recorded, served
    from edgebuild.report.model import Report, StageReport, TargetReport
    from edgebuild.run.artifacts import export_target, manifest_of
    from edgebuild.run.records import target_records

    searches = searches or {}
    memo = store.root if store is not None else None  # cache/memo.py
    targets = []
    contained: set[str] = set()  # stages of candidates whose search still chose one
    owned = own_stages(built) if searches else {}
    model = model_metadata_of(built, execution)
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
            gates = evaluate_target(name, entry.gates, target_records(stages, execution),
                                    loaded.recipe.policy_for(name), memo=memo)
        chosen = outcome is None or outcome.chosen is not None
        run = execution.runs[stages.compiled]
        compiled = run.artifact if chosen else None
        manifest = None
        if compiled is not None and run.key:
            manifest = manifest_of(loaded.recipe.name, name,
                                   loaded.targets[run.stage.target or name], compiled,
                                   run.key, gates, started_wall,
                                   outcome.chosen if outcome is not None else None)
        artifact_path = export_target(out, name, compiled, manifest, memo)
        timed = execution.runs.get(stages.latency or "")
        op_profile, memory = recorded(timed.artifact.metadata if timed and timed.artifact
                                      else None)
        serving = served(timed.artifact.metadata if timed and timed.artifact else None)
        targets.append(TargetReport(
            name=name, profile=info.profile.name, backend=info.backend,
            artifact=artifact_path, format=compiled.format if compiled else None,
            size_bytes=compiled.shipped_bytes if compiled else None,
            gates=gates, search=search_report,
            notes=notes_of(compiled) if compiled else {},
            precision=compiled.precision_label if compiled else "",
            model=model, op_profile=op_profile, memory=memory, serving=serving,
            speedup_over=entry.gates.speedup.over if entry.gates.speedup else None))
    stage_reports = [StageReport(
        id=run.stage.id, op=run.stage.op, target=run.stage.target,
        inputs=run.stage.upstream, outcome=run.outcome.value,
        cached=run.outcome is Outcome.CACHED,
        seconds=round(run.seconds, 3), key=run.key,
        artifact_digest=run.artifact.digest if run.artifact else None,
        message=run.message, hint=run.hint, log=str(run.log) if run.log else None,
        started=run.started, finished=run.finished, worker=run.worker,
        metadata={k: v for k, v in (run.artifact.metadata if run.artifact else
                                    run.metadata).items()
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
        machine={"platform": platform_name(), "machine": platform.machine(),
                 "cores": os.cpu_count()})


def platform_name() -> str:
    """platform.platform()'s answer on Linux without the `uname -p` process it starts (a
    fully cached run starts none: run/replay.py), e.g. Linux-6.1.0-x86_64-with-glibc2.36."""
    uname = os.uname()
    libc = os.confstr("CS_GNU_LIBC_VERSION") if "CS_GNU_LIBC_VERSION" in os.confstr_names \
        else None
    if uname.sysname != "Linux" or not libc:
        return platform.platform()
    return f"Linux-{uname.release}-{uname.machine}-with-{libc.replace(' ', '')}"


def _search_gates(name: str, outcome: SearchResult, execution: ExecutionResult,
                  loaded: LoadedRecipe) -> tuple[list[GateResult], TargetStages, SearchReport]:
    """A search target's gates: the chosen candidate's, as the target's, plus `search`."""
    from edgebuild.gates.evaluate import evaluate_target
    from edgebuild.gates.result import GateResult, GateStatus
    from edgebuild.run.records import target_records
    from edgebuild.run.search import CandidateState
    from edgebuild.run.search_report import search_report

    entry = loaded.recipe.targets[name]
    policy = loaded.recipe.policy_for(name)
    if outcome.chosen is not None:
        stages = outcome.candidates[outcome.chosen].stages
        gates = evaluate_target(name, entry.gates, target_records(stages, execution), policy)
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


def finite_json(text: str) -> str:
    """`text` as strict JSON: a figure that is not finite (a record keeps NaN as `NaN`, a
    device log's `1e999` became inf) is written as null, since `NaN` and `Infinity` are
    not JSON and a CI step reading report.json would fail on them."""
    import json

    found: list[str] = []

    def constant(token: str) -> None:
        found.append(token)

    data = json.loads(text, parse_constant=constant)
    return json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False) if found else text


def write_reports(report: Report, out: Path) -> None:
    from edgebuild.report.html import html_page
    from edgebuild.report.render import junit, markdown

    for name, text in (("report.json", finite_json(report.model_dump_json(indent=2))),
                       ("summary.md", markdown(report)), ("junit.xml", junit(report)),
                       ("report.html", html_page(report))):
        tmp = out / f".{name}.tmp"
        tmp.write_text(text)
        tmp.replace(out / name)
