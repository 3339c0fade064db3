"""Running a plan that has searches: candidates in waves, gates, then the select stage.

The executor runs a whole graph at once, but a search needs decisions between
stages: a candidate is started only while the time budget lasts, one that fails
must not stop the others, and what `select` compares depends on which
candidates passed their gates. So the plan is executed in waves, each an
ordinary executor run over a sub-graph::

    wave 0        every stage no single candidate owns (shared export, references,
                  the other targets)                       -- the user's failure policy
    wave per      the stages only this candidate needs     -- skipped, "not tried",
    candidate     (its passes, compile, infer, latency)       once max_minutes is up
    gates         evaluated from the cached measurements, as for any target
    select wave   a new small plan: `select@T` with only the passing candidates as
                  inputs, so its key follows their artifacts and a re-run reuses it

Stages finished in an earlier wave are settled again as cache hits by later
waves (the Store verifies an entry once per run), and the progress callback
hears about each stage once. The planned graph is never edited while it runs.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Protocol

from edgebuild.core.artifact import Artifact
from edgebuild.core.digest import canonical_json
from edgebuild.execute.policy import FailurePolicy
from edgebuild.execute.result import ExecutionResult, Outcome, StageRun
from edgebuild.gates.result import GateResult, GateStatus
from edgebuild.measure.record import SelectionRecord, read_record
from edgebuild.plan.graph import StageGraph
from edgebuild.plan.planner import (
    Plan,
    SearchStages,
    TargetStages,
    candidate_ids,
    own_stages,
    select_params,
)
from edgebuild.plan.resolve import KeyResolver, StageState, StageStatus
from edgebuild.plan.stage import Stage

if TYPE_CHECKING:
    from edgebuild.execute.result import Progress


class CandidateState(StrEnum):
    CHOSEN = "chosen"
    PASSED = "passed"  # passed every gate; another candidate was faster
    REJECTED = "rejected"  # measured, and a gate failed
    FAILED = "failed"  # one of its stages failed or was not run
    UNMEASURABLE = "unmeasurable"  # this machine cannot measure it
    NOT_TRIED = "not-tried"  # the time budget ran out before it started


@dataclass
class CandidateResult:
    name: str
    stages: TargetStages
    state: CandidateState
    reason: str = ""
    gates: list[GateResult] = field(default_factory=list)
    own: list[str] = field(default_factory=list)  # the stages only this candidate needs


@dataclass
class SearchResult:
    target: str
    candidates: dict[str, CandidateResult]
    chosen: str | None
    message: str
    seconds: float = 0.0
    ranking: SelectionRecord | None = None  # the select stage's record, if it ran

    @property
    def passing(self) -> list[str]:
        return [n for n, c in self.candidates.items()
                if c.state in (CandidateState.CHOSEN, CandidateState.PASSED)]


class PlanExecutor(Protocol):
    """Runs a whole (sub-)plan: the scheduler on the run's executor, or a test double."""

    def execute(self, plan: Plan, resolver: KeyResolver) -> ExecutionResult: ...


MakeExecutor = Callable[["Progress"], PlanExecutor]


def execute(plan: Plan, resolver: KeyResolver, make_executor: MakeExecutor,
            progress: Progress | None, policy: FailurePolicy,
            clock: Callable[[], float] = time.monotonic
            ) -> tuple[ExecutionResult, dict[str, SearchResult]]:
    """Execute `plan`; the plain targets as always, every search in waves."""
    report: Progress = progress or (lambda event, item: None)
    searches = {t: s.search for t, s in plan.targets.items() if s.search is not None}
    if not searches:
        return make_executor(report).execute(plan, resolver), {}
    runner = _Waves(plan, resolver, make_executor, report)
    own = own_stages(plan)
    exclusive = {sid for by_name in own.values() for ids in by_name.values() for sid in ids}
    exclusive |= {s.select for s in searches.values()}
    runner.run([sid for sid in plan.graph if sid not in exclusive])
    stopped = policy is FailurePolicy.FAIL_FAST and bool(runner.result.failed)
    outcomes = {}
    for target, search in searches.items():
        outcomes[target] = _search(runner, target, search, own[target], stopped, clock)
    return runner.result, outcomes


class _Waves:
    """Runs sub-graphs of one plan and merges their results into one."""

    def __init__(self, plan: Plan, resolver: KeyResolver, make_executor: MakeExecutor,
                 progress: Progress) -> None:
        self.plan = plan
        self.resolver = resolver
        self.make_executor = make_executor
        self.progress = progress
        self.result = ExecutionResult()

    def sub_plan(self, ids: list[str]) -> Plan:
        wanted = set(ids)
        for sid in ids:
            wanted |= self.plan.graph.ancestors(sid)
        graph = StageGraph()  # in the plan's node order, which breaks ties in Plan.order
        graph.add_nodes_from((s, d) for s, d in self.plan.graph.nodes(data=True) if s in wanted)
        graph.add_edges_from((a, b) for a, b in self.plan.graph.edges if b in wanted)
        return Plan(self.plan.recipe, graph, self.plan.targets)

    def run(self, ids: list[str]) -> None:
        if ids:
            self.execute(self.sub_plan(ids))

    def execute(self, sub: Plan) -> None:
        done = set(self.result.runs)

        def forward(event: str, item: StageRun | Stage | Plan) -> None:
            stage = item.stage if isinstance(item, StageRun) else item
            if isinstance(stage, Stage) and stage.id not in done:
                self.progress(event, item)

        executed = self.make_executor(forward).execute(sub, self.resolver)
        for sid, run in executed.runs.items():
            self.result.runs.setdefault(sid, run)

    def skip(self, ids: list[str], message: str) -> None:
        for sid in ids:
            if sid not in self.result.runs:
                run = StageRun(self.plan.stage(sid), Outcome.SKIPPED, message=message)
                self.result.runs[sid] = run
                self.progress("end", run)

    def blocker(self, ids: list[str]) -> StageRun | None:
        """A finished upstream stage of `ids` (outside them) that produced nothing."""
        inside = set(ids)
        for sid in ids:
            for up in self.plan.graph.ancestors(sid) - inside:
                run = self.result.runs.get(up)
                if run is not None and run.artifact is None:
                    return run
        return None

    def all_cached(self, ids: list[str]) -> bool:
        """Whether every stage of `ids` is already in the store (costs no time)."""
        artifacts = {sid: r.artifact for sid, r in self.result.runs.items() if r.artifact}
        for stage in self.sub_plan(ids).order():
            if stage.id in artifacts:
                continue
            if any(up not in artifacts for up in stage.upstream):
                return False
            key = self.resolver.key(stage, {role: artifacts[up] for role, up in stage.inputs})
            artifact = self.resolver.store.present(key)
            if artifact is None:
                return False
            artifacts[stage.id] = artifact
        return True


def _search(waves: _Waves, target: str, search: SearchStages, own: dict[str, list[str]],
            stopped: bool, clock: Callable[[], float]) -> SearchResult:
    plan = waves.plan
    entry = plan.recipe.recipe.targets[target]
    assert entry.search is not None
    budget = entry.search.max_minutes
    started = clock()
    results: dict[str, CandidateResult] = {}
    for name, stages in search.candidates.items():
        ids = own[name]
        blocker = waves.blocker(ids)
        if stopped:
            waves.skip(ids, "not run: stopped after a failure (fail-fast)")
        elif blocker is not None:
            waves.skip(ids, f"not run: '{blocker.stage.id}' {blocker.outcome.value}")
        elif budget is not None and clock() - started >= budget * 60 and \
                not waves.all_cached(ids):
            waves.skip(ids, f"not tried: the search's time budget (max_minutes: {budget:g}) "
                       "was used up")
        else:
            waves.run(ids)
        results[name] = judge(target, name, stages, waves.result, plan)
        results[name].own = ids
    seconds = clock() - started
    passing = [n for n, c in results.items() if c.state is CandidateState.PASSED]
    compiled = {n: waves.result.runs[search.candidates[n].compiled].artifact for n in passing}
    passing, twins = distinct(plan, target, compiled)
    for name, first in twins.items():
        results[name].reason = f"builds and runs exactly like '{first}', which stands for it"
    select = plan.stage(search.select)
    ranking = None
    if len(passing) >= 2:
        # Which candidates `select` compares is known only now: it runs as a new small
        # plan (their finished stages and itself); the planned graph is never edited.
        stage = select_stage(plan, target, search, passing)
        waves.execute(select_plan(plan, stage))
        run = waves.result.runs[stage.id]
        if run.artifact is not None:
            ranking = read_record(SelectionRecord, run.artifact.metadata, stage.id)
    else:
        why = (f"not needed: only '{passing[0]}' passed every gate" if passing
               else "not run: no candidate passed every gate")
        if twins and passing:
            why = f"not needed: every candidate that passed builds '{passing[0]}''s artifact"
        waves.skip([select.id], why)
    chosen = ranking.chosen if ranking else passing[0] if len(passing) == 1 else None
    if chosen is not None:
        results[chosen].state = CandidateState.CHOSEN
    return SearchResult(target, results, chosen,
                        _message(results, chosen, ranking, waves.result.runs[select.id]),
                        round(seconds, 3), ranking)


def distinct(plan: Plan, target: str, artifacts: dict[str, Artifact | None]
             ) -> tuple[list[str], dict[str, str]]:
    """Candidates that differ, and each duplicate -> the first one it duplicates.

    Two configurations can compile to the same bytes (an accuracy-aware budget that
    ends with the same layers in float); if they also run with the same profile
    (backend options, threads), timing them against each other would only pick one
    by noise, so the first in recipe order stands for both. Options are compared as
    they took effect on this machine when the compile stage says so
    (`metadata["effective_options"]`: OpenVINO's bf16 hint on a CPU without bf16 runs
    the f32 kernels, so it is a twin of f32, not a rival that wins by noise).
    """
    first: dict[str, str] = {}
    kept: list[str] = []
    twins: dict[str, str] = {}
    for name, built in artifacts.items():
        profile = plan.recipe.targets[f"{target}[{name}]"].profile.model_dump(mode="json")
        effective = built.metadata.get("effective_options") if built is not None else None
        if isinstance(effective, dict):
            profile["options"] = {**profile["options"], **effective}
        digest = canonical_json([built.digest if built is not None else name, profile])
        if digest in first:
            twins[name] = first[digest]
        else:
            first[digest] = name
            kept.append(name)
    return kept, twins


def select_stage(plan: Plan, target: str, search: SearchStages, names: list[str]) -> Stage:
    """The select stage comparing exactly `names` (what the planner would build for them)."""
    params = select_params(plan.recipe, target, names)
    inputs = {n: search.candidates[n].compiled for n in names}
    return Stage(search.select, "select", canonical_json(params), tuple(sorted(inputs.items())),
                 target, measures=True)


def select_plan(plan: Plan, stage: Stage) -> Plan:
    """A plan of `stage` (a select stage) and the stages it depends on."""
    wanted: set[str] = set(stage.upstream)
    for sid in stage.upstream:
        wanted |= plan.graph.ancestors(sid)
    graph = StageGraph()
    graph.add_nodes_from((s, d) for s, d in plan.graph.nodes(data=True) if s in wanted)
    graph.add_edges_from((a, b) for a, b in plan.graph.edges if a in wanted and b in wanted)
    graph.add_node(stage.id, stage=stage)
    graph.add_edges_from((up, stage.id) for up in stage.upstream)
    return Plan(plan.recipe, graph, {})


def judge(target: str, name: str, stages: TargetStages, execution: ExecutionResult,
          plan: Plan) -> CandidateResult:
    """A candidate's gates, and the one-line reason when it cannot be chosen."""
    from edgebuild.gates.evaluate import evaluate_target
    from edgebuild.gates.kinds import failure
    from edgebuild.run.records import target_records

    entry = plan.recipe.recipe.targets[target]
    runs = [execution.runs.get(s) for s in candidate_ids(stages)]
    for run in runs:
        if run is None or run.outcome is Outcome.SKIPPED:
            message = run.message if run else "not run"
            state = (CandidateState.NOT_TRIED if message.startswith("not tried")
                     else CandidateState.FAILED)
            return CandidateResult(name, stages, state, message)
        if run.outcome is Outcome.FAILED:
            return CandidateResult(name, stages, CandidateState.FAILED,
                                   f"stage '{run.stage.id}' failed: {run.message}")
    gates = evaluate_target(f"{target}[{name}]", entry.gates, target_records(stages, execution),
                            plan.recipe.recipe.policy_for(target), keep_samples=False)
    if all(g.status is GateStatus.PASSED for g in gates):
        return CandidateResult(name, stages, CandidateState.PASSED, "", gates)
    bad = [g for g in gates if g.status is not GateStatus.PASSED]
    state = (CandidateState.UNMEASURABLE if any(g.status is GateStatus.UNMEASURABLE for g in bad)
             else CandidateState.REJECTED)
    reason = "; ".join(f"{g.gate} {g.status.value}: {failure(g)}" for g in bad)
    return CandidateResult(name, stages, state, reason, gates)


def _message(results: dict[str, CandidateResult], chosen: str | None,
             ranking: SelectionRecord | None, select: StageRun) -> str:
    total = len(results)
    tried = sum(1 for c in results.values() if c.state is not CandidateState.NOT_TRIED)
    counted = f"{tried} of {total} candidates tried" if tried < total else f"{total} candidates"
    passing = [n for n, c in results.items()
               if c.state in (CandidateState.CHOSEN, CandidateState.PASSED)]
    if chosen is None:
        if len(passing) >= 2:
            return (f"{len(passing)} candidates passed every gate, but comparing them failed: "
                    f"{select.message}")
        states: dict[str, int] = {}
        for result in results.values():
            states[result.state.value] = states.get(result.state.value, 0) + 1
        return (f"no candidate passed every gate ({counted}: "
                + ", ".join(f"{n} {state}" for state, n in states.items()) + ")")
    if ranking is None:
        if len(passing) > 1:
            return (f"chose '{chosen}': the {len(passing)} candidates that passed every gate "
                    f"build the same artifact ({counted})")
        return f"chose '{chosen}', the only candidate that passed every gate ({counted})"
    standings = ranking.candidates
    winner = standings[0]
    timed = (f"; {len(standings)} distinct builds timed" if len(standings) < len(passing)
             else "")
    median = f"interleaved median {winner.median_ms:.3f} ms"
    if winner.profiles:
        profiles = list(winner.profiles)
        median = (f"lowest geometric mean over the {len(profiles)} shape profiles, "
                  f"{median} at {profiles[0]}")
    text = (f"chose '{chosen}': fastest of the {len(passing)} candidates that passed every "
            f"gate ({counted}{timed}), {median}")
    if len(standings) > 1:
        second = standings[1]
        low, high = second.ci95
        text += (f"; next '{second.name}' x{second.ratio:.2f} "
                 f"[95 % CI {low:.2f}-{high:.2f}]")
        if not second.slower:
            text += ", within noise"
    return text


def refine_status(plan: Plan, resolver: KeyResolver,
                  status: dict[str, StageStatus]) -> dict[str, StageStatus]:
    """What `plan` shows for select stages: decided by the cached candidates' gates.

    The planner's select stage names every candidate; the one a run executes
    names only those that pass. When every candidate is cached, its gates are
    known, and so is the key of the select stage a run would execute.
    """
    from edgebuild.gates.evaluate import evaluate_target
    from edgebuild.run.records import target_records

    for target, stages in plan.targets.items():
        if stages.search is None:
            continue
        search = stages.search
        runs = {sid: StageRun(plan.stage(sid), Outcome.CACHED, key=s.key, artifact=s.artifact)
                for sid, s in status.items() if s.state is StageState.CACHED}
        execution = ExecutionResult(runs)
        entry = plan.recipe.recipe.targets[target]
        passing: list[str] = []
        known = True
        for name, cand in search.candidates.items():
            if any(sid not in runs for sid in candidate_ids(cand)):
                known = False
                break
            gates = evaluate_target(f"{target}[{name}]", entry.gates,
                                    target_records(cand, execution),
                                    plan.recipe.recipe.policy_for(target), keep_samples=False)
            if all(g.status is GateStatus.PASSED for g in gates):
                passing.append(name)
        if not known:
            continue
        compiled = {n: runs[search.candidates[n].compiled].artifact for n in passing}
        passing, _ = distinct(plan, target, compiled)
        if len(passing) < 2:
            status[search.select] = StageStatus(StageState.CACHED, None)
            continue
        stage = select_stage(plan, target, search, passing)
        inputs = {role: runs[sid].artifact for role, sid in stage.inputs}
        key = resolver.key(stage, {r: a for r, a in inputs.items() if a is not None})
        artifact = resolver.store.present(key)
        status[search.select] = StageStatus(
            StageState.CACHED if artifact else StageState.TO_RUN, key, artifact)
    return status
