"""The recipe `search` option: parsing, planning, the waves that run it, and selection."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from edgebuild.cache.store import Store
from edgebuild.core.artifact import Artifact
from edgebuild.errors import PlanError, RecipeError
from edgebuild.execute.policy import FailurePolicy
from edgebuild.execute.result import ExecutionResult, Outcome, StageRun
from edgebuild.measure.record import SelectionRecord, Standing
from edgebuild.measure.timing import time_blocks
from edgebuild.measuring.select import pareto_front, rank
from edgebuild.plan.planner import Plan, build_plan, own_stages
from edgebuild.plan.resolve import KeyResolver
from edgebuild.recipe.common import MeasureSettings
from edgebuild.recipe.loader import LoadedRecipe, load_recipe
from edgebuild.recipe.models import SearchCandidate
from edgebuild.recipe.search import expand
from edgebuild.run import search as search_mod

RECIPE = """\
name: demo
model: {onnx: m.onnx}
inputs: [{name: x, shape: [1, 4]}]
datasets:
  calib: {kind: npz, path: d.npz}
passes: [onnx-optimize]
targets:
  host-cpu:
    gates:
      accuracy: {dataset: calib, min_top1_agreement: 99}
      latency: {budget_ms: 5}
    search:
      max_candidates: 8
      candidates:
        fp32: {}
        basic:
          options: {graph_optimization_level: basic}
        int8:
          passes: [quantize: {mode: static, calibration: calib}]
          grid:
            quantize.method: [minmax, entropy]
            quantize.per_channel: [true, false]
"""


def load(tmp_path: Path, text: str) -> LoadedRecipe:
    path = tmp_path / "r.yaml"
    path.write_text(text)
    return load_recipe(path)


def problems_of(tmp_path: Path, text: str) -> list[str]:
    with pytest.raises(RecipeError) as info:
        load(tmp_path, text)
    return [str(p) for p in info.value.problems]


# -- parsing -------------------------------------------------------------------------


def test_grid_expands_in_order_with_readable_names() -> None:
    spec = SearchCandidate.model_validate({
        "passes": [{"quantize": {"mode": "static", "calibration": "c"}}],
        "grid": {"quantize.method": ["minmax", "entropy"], "quantize.per_channel": [True, False],
                 "quantize.accuracy_aware.max_drop": [0.5]}})
    found = expand("host-cpu", "int8", spec)
    assert [c.name for c in found] == [
        "int8-minmax-per_channel=true-max_drop=0.5", "int8-minmax-per_channel=false-max_drop=0.5",
        "int8-entropy-per_channel=true-max_drop=0.5", "int8-entropy-per_channel=false-max_drop=0.5"]
    last = found[-1]
    assert last.passes[0].params == {"mode": "static", "calibration": "c", "method": "entropy",
                                     "per_channel": False, "accuracy_aware": {"max_drop": 0.5}}
    assert last.point == {"quantize.method": "entropy", "quantize.per_channel": False,
                          "quantize.accuracy_aware.max_drop": 0.5}
    assert last.target_name == "host-cpu[int8-entropy-per_channel=false-max_drop=0.5]"
    assert spec.passes[0].params == {"mode": "static", "calibration": "c"}  # not mutated


def test_grid_over_options_and_measure() -> None:
    spec = SearchCandidate.model_validate({
        "grid": {"options.graph_optimization_level": ["basic", "all"], "measure.threads": [1, 2]}})
    found = expand("t", "ort", spec)
    assert [c.name for c in found] == ["ort-basic-threads=1", "ort-basic-threads=2",
                                       "ort-all-threads=1", "ort-all-threads=2"]
    assert found[1].options == {"graph_optimization_level": "basic"}
    assert found[1].measure is not None and found[1].measure.threads == 2
    assert found[1].describe() == "options(graph_optimization_level=basic) + measure(threads=2)"


def test_valid_search_loads_candidates_as_targets(tmp_path: Path) -> None:
    loaded = load(tmp_path, RECIPE)
    names = [c.name for c in loaded.searches["host-cpu"]]
    assert names[:2] == ["fp32", "basic"] and len(names) == 6
    basic = loaded.targets["host-cpu[basic]"]
    assert basic.options["graph_optimization_level"] == "basic"
    assert loaded.targets["host-cpu[fp32]"].profile == loaded.targets["host-cpu"].profile


def test_unknown_pass_in_candidate_names_line_and_suggests(tmp_path: Path) -> None:
    (problem,) = problems_of(tmp_path, RECIPE.replace("passes: [quantize:", "passes: [quantise:"))
    assert "r.yaml:19:" in problem
    assert "targets.host-cpu.search.candidates.int8.passes.0" in problem
    assert "unknown pass 'quantise'" in problem and "did you mean 'quantize'?" in problem


def test_grid_key_naming_an_absent_pass(tmp_path: Path) -> None:
    (problem,) = problems_of(tmp_path, RECIPE.replace("quantize.method", "quantise.method"))
    assert "r.yaml:21:" in problem
    assert "grid.quantise.method" in problem
    assert "has no 'quantise' pass" in problem and "did you mean 'quantize'?" in problem


def test_bad_grid_value_is_reported_once_with_the_candidate(tmp_path: Path) -> None:
    problems = problems_of(tmp_path, RECIPE.replace("[minmax, entropy]", "[minmax, entopy]"))
    (problem,) = problems
    assert "r.yaml:19:" in problem
    assert "'entopy'" in problem
    assert "candidate 'int8-entopy-per_channel=true'" in problem


def test_bad_param_in_candidate_pass_suggests(tmp_path: Path) -> None:
    text = RECIPE.replace("calibration: calib}]", "calibraton: calib}]")
    problems = problems_of(tmp_path, text)
    assert any("unknown key 'calibraton'" in p and "did you mean 'calibration'?" in p
               for p in problems)


def test_duplicate_candidate_names(tmp_path: Path) -> None:
    text = RECIPE.replace("        fp32: {}\n",
                          "        fp32: {}\n        int8-minmax-per_channel=true: {}\n")
    (problem,) = problems_of(tmp_path, text)
    assert "candidate name 'int8-minmax-per_channel=true' is used twice" in problem
    assert "also by 'int8-minmax-per_channel=true'" in problem
    # A key written twice is caught by the YAML reader, with both lines.
    with pytest.raises(RecipeError, match=r"r.yaml:\d+:\d+.*duplicate key 'fp32'"):
        load(tmp_path, RECIPE.replace("        fp32: {}\n", "        fp32: {}\n        fp32: {}\n"))


def test_empty_candidates_and_empty_grid(tmp_path: Path) -> None:
    start = RECIPE.index("      candidates:")
    (problem,) = problems_of(tmp_path, RECIPE[:start] + "      candidates: {}\n")
    assert "a search needs at least one candidate" in problem
    (problem,) = problems_of(tmp_path, RECIPE.replace("[true, false]", "[]"))
    assert "grid key 'quantize.per_channel' lists no values" in problem


def test_too_many_candidates(tmp_path: Path) -> None:
    (problem,) = problems_of(tmp_path, RECIPE.replace("max_candidates: 8", "max_candidates: 4"))
    assert "r.yaml:13:" in problem
    assert "6 candidates (after grid expansion), more than max_candidates 4" in problem
    assert "raise `max_candidates`" in problem


def test_search_needs_an_accuracy_gate(tmp_path: Path) -> None:
    text = RECIPE.replace("      accuracy: {dataset: calib, min_top1_agreement: 99}\n", "")
    (problem,) = problems_of(tmp_path, text)
    assert "needs `gates.accuracy`" in problem


def test_bad_candidate_option(tmp_path: Path) -> None:
    (problem,) = problems_of(tmp_path, RECIPE.replace("{graph_optimization_level: basic}",
                                                      "{graph_optimisation_level: basic}"))
    assert "candidates.basic.options" in problem
    assert "did you mean 'graph_optimization_level'?" in problem


def test_unknown_key_in_search(tmp_path: Path) -> None:
    (problem,) = problems_of(tmp_path, RECIPE.replace("max_candidates:", "max_candidate:"))
    assert "did you mean 'max_candidates'?" in problem


# -- planning ------------------------------------------------------------------------


def test_each_candidate_is_a_target_like_chain(tmp_path: Path) -> None:
    plan = build_plan(load(tmp_path, RECIPE))
    ops = [s.op for s in plan.order()]
    assert ops.count("onnx-optimize") == 1 and ops.count("reference") == 1
    assert ops.count("compile") == 6 and ops.count("select") == 1
    assert plan.stage("compile@host-cpu[fp32]").upstream == ["onnx-optimize"]
    assert plan.stage("compile@host-cpu[basic]").upstream == ["onnx-optimize"]
    quantize = "quantize[int8-entropy-per_channel=false]"
    assert plan.stage("compile@host-cpu[int8-entropy-per_channel=false]").upstream == [quantize]
    assert plan.stage(quantize).upstream == ["onnx-optimize"]
    # Every candidate is measured (the table needs its latency), and selection measures too.
    assert {s.id for s in plan.order() if s.measures} >= {
        "measure-latency@host-cpu[fp32]", "infer@host-cpu[basic]", "select@host-cpu"}
    select = plan.stage("select@host-cpu")
    assert dict(select.inputs)["basic"] == "compile@host-cpu[basic]"
    assert plan.targets["host-cpu"].search is not None
    assert plan.targets["host-cpu"].search.select == "select@host-cpu"


def test_candidate_without_inherited_passes(tmp_path: Path) -> None:
    text = RECIPE.replace("        fp32: {}\n", "        raw:\n          inherit_passes: false\n")
    plan = build_plan(load(tmp_path, text))
    assert plan.stage("compile@host-cpu[raw]").upstream == ["import-onnx"]


def test_identical_candidates_are_a_plan_error(tmp_path: Path) -> None:
    text = RECIPE.replace("        fp32: {}\n",
                          "        fp32: {}\n        same:\n          options: {}\n")
    with pytest.raises(PlanError, match="'fp32' and 'same' build the same thing"):
        build_plan(load(tmp_path, text))


def test_own_stages_leave_shared_ones_to_wave_zero(tmp_path: Path) -> None:
    text = RECIPE + "  rpi4:\n    gates: {latency: {budget_ms: 50}}\n"
    plan = build_plan(load(tmp_path, text))
    own = own_stages(plan)["host-cpu"]
    assert own["fp32"] == ["compile@host-cpu[fp32]", "infer@host-cpu[fp32]",
                           "measure-latency@host-cpu[fp32]"]
    assert own["int8-minmax-per_channel=true"][0] == "quantize[int8-minmax-per_channel=true]"
    everything = {sid for ids in own.values() for sid in ids}
    assert "onnx-optimize" not in everything and "reference" not in everything


# -- the waves: budgets, failures, the select stage ---------------------------------


class FakeExecutor:
    """Marks every stage built (or failed, when listed), recording what it was asked to run."""

    def __init__(self, log: list[list[str]], fail: set[str], progress: Any,
                 digests: dict[str, str]) -> None:
        self.log = log
        self.fail = fail
        self.progress = progress
        self.digests = digests  # stage id -> content (default: its id, all different)

    def execute(self, plan: Plan, resolver: Any) -> ExecutionResult:
        result = ExecutionResult()
        ran = []
        for stage in plan.order():
            if any(result.runs[u].artifact is None for u in stage.upstream):
                run = StageRun(stage, Outcome.SKIPPED, message="not run: upstream failed")
            elif stage.id in self.fail:
                run = StageRun(stage, Outcome.FAILED, message="boom")
            else:
                metadata: dict[str, Any] = {}
                if stage.op == "select":
                    names = [role for role, _ in stage.inputs]
                    metadata = SelectionRecord(chosen=names[-1], rounds=1, tied=[], candidates=[
                        Standing(name=n, median_ms=1.0, p90_ms=1.0, ratio=1.0, ci95=(1, 1),
                                 slower=False) for n in reversed(names)]).to_json()
                run = StageRun(stage, Outcome.BUILT, artifact=Artifact(
                    "k" * 64, "x", Path(), {"out": self.digests.get(stage.id, stage.id)}, {},
                    metadata))
            ran.append(stage.id)
            result.runs[stage.id] = run
            self.progress("end", run)
        self.log.append(ran)
        return result


def run_search(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str = RECIPE,
               fail: set[str] | None = None, passing: set[str] | None = None,
               clock: Callable[[], float] | None = None, digests: dict[str, str] | None = None
               ) -> tuple[Plan, ExecutionResult, search_mod.SearchResult, list[list[str]],
                          list[str]]:
    loaded = load(tmp_path, text)
    plan = build_plan(loaded)
    everyone = {c.name for c in loaded.searches["host-cpu"]}
    passes = everyone if passing is None else passing

    def judge(target: str, name: str, stages: Any, execution: ExecutionResult,
              plan: Plan) -> search_mod.CandidateResult:
        if any(execution.runs[s].artifact is None for s in [stages.compiled]):
            run = execution.runs[stages.compiled]
            state = (search_mod.CandidateState.NOT_TRIED if run.message.startswith("not tried")
                     else search_mod.CandidateState.FAILED)
            return search_mod.CandidateResult(name, stages, state, run.message)
        state = (search_mod.CandidateState.PASSED if name in passes
                 else search_mod.CandidateState.REJECTED)
        return search_mod.CandidateResult(name, stages, state)

    monkeypatch.setattr(search_mod, "judge", judge)
    log: list[list[str]] = []
    events: list[str] = []

    def progress(event: str, item: Any) -> None:
        events.append(item.stage.id if isinstance(item, StageRun) else item.id)

    resolver = KeyResolver(plan, Store(tmp_path / "cache"))
    execution, outcomes = search_mod.execute(
        plan, resolver, lambda p: FakeExecutor(log, fail or set(), p, digests or {}),  # type: ignore[arg-type,return-value]
        progress, FailurePolicy.FAIL_FAST, clock or (lambda: 0.0))
    return plan, execution, outcomes["host-cpu"], log, events


def test_waves_run_shared_stages_first_then_each_candidate(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plan, execution, outcome, log, events = run_search(tmp_path, monkeypatch)
    assert set(log[0]) == {"import-onnx", "onnx-optimize", "reference"}
    assert log[1][-3:] == ["compile@host-cpu[fp32]", "infer@host-cpu[fp32]",
                           "measure-latency@host-cpu[fp32]"]
    assert len(log) == 1 + 6 + 1  # shared, six candidates, select
    assert set(execution.runs) == set(plan.graph)
    assert sorted(events) == sorted(plan.graph)  # each stage reported once
    assert outcome.chosen == "int8-minmax-per_channel=true"  # the fake picks the last role
    assert outcome.candidates[outcome.chosen].state is search_mod.CandidateState.CHOSEN


def test_select_compares_only_the_passing_candidates(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plan, execution, outcome, _, _ = run_search(tmp_path, monkeypatch,
                                                passing={"fp32", "basic"})
    select = execution.runs["select@host-cpu"].stage
    assert [role for role, _ in select.inputs] == ["basic", "fp32"]
    # The executed select is a new small plan; the planned graph is never edited.
    assert len(list(plan.graph.predecessors("select@host-cpu"))) == len(
        plan.targets["host-cpu"].search.candidates)  # type: ignore[union-attr]
    assert outcome.chosen in {"fp32", "basic"}
    assert outcome.candidates["int8-minmax-per_channel=true"].state is \
        search_mod.CandidateState.REJECTED


def test_one_passing_candidate_needs_no_select(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, execution, outcome, log, _ = run_search(tmp_path, monkeypatch, passing={"basic"})
    assert outcome.chosen == "basic"
    assert "select@host-cpu" not in log[-1]
    run = execution.runs["select@host-cpu"]
    assert run.outcome is Outcome.SKIPPED and "only 'basic' passed" in run.message
    assert "the only candidate that passed every gate" in outcome.message


def test_candidates_with_the_same_artifact_are_timed_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    same = {"compile@host-cpu[int8-minmax-per_channel=true]": "a",
            "compile@host-cpu[int8-entropy-per_channel=true]": "a",
            "compile@host-cpu[fp32]": "a", "compile@host-cpu[basic]": "a"}
    passing = {"int8-minmax-per_channel=true", "int8-entropy-per_channel=true", "basic"}
    _, execution, outcome, _, _ = run_search(tmp_path, monkeypatch, passing=passing,
                                             digests=same)
    # Same bytes and same profile: the first in recipe order stands for both. `basic`
    # has the same bytes but other session options, so it is compared.
    twin = outcome.candidates["int8-entropy-per_channel=true"]
    assert "exactly like 'int8-minmax-per_channel=true'" in twin.reason
    assert twin.state is search_mod.CandidateState.PASSED
    select = execution.runs["select@host-cpu"]
    assert [role for role, _ in select.stage.inputs] == ["basic", "int8-minmax-per_channel=true"]
    assert outcome.chosen in ("basic", "int8-minmax-per_channel=true")


def test_twins_by_the_options_that_took_effect(tmp_path: Path) -> None:
    """Same bytes, other options: rivals, unless the compile stage says the options took
    the same effect here (OpenVINO's bf16 hint on a CPU without bf16 runs as f32)."""
    plan = build_plan(load(tmp_path, RECIPE))

    def built(effective: dict[str, Any] | None) -> Artifact:
        metadata = {} if effective is None else {"effective_options": effective}
        return Artifact("k" * 64, "x", Path(), {"out": "same"}, {}, metadata)

    kept, twins = search_mod.distinct(plan, "host-cpu", {"fp32": built(None),
                                                         "basic": built(None)})
    assert kept == ["fp32", "basic"] and twins == {}
    same = {"graph_optimization_level": "all"}
    kept, twins = search_mod.distinct(plan, "host-cpu", {"fp32": built(same),
                                                         "basic": built(same)})
    assert kept == ["fp32"] and twins == {"basic": "fp32"}


def test_twins_alone_need_no_select(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    same = {"compile@host-cpu[int8-minmax-per_channel=true]": "a",
            "compile@host-cpu[int8-entropy-per_channel=true]": "a"}
    passing = {"int8-minmax-per_channel=true", "int8-entropy-per_channel=true"}
    _, execution, outcome, _, _ = run_search(tmp_path, monkeypatch, passing=passing,
                                             digests=same)
    assert outcome.chosen == "int8-minmax-per_channel=true"
    assert execution.runs["select@host-cpu"].outcome is Outcome.SKIPPED
    assert "2 candidates that passed every gate build the same artifact" in outcome.message


def test_no_passing_candidate_chooses_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, _, outcome, _, _ = run_search(tmp_path, monkeypatch, passing=set())
    assert outcome.chosen is None
    assert outcome.message == "no candidate passed every gate (6 candidates: 6 rejected)"


def test_a_failing_candidate_does_not_stop_the_others(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    failing = "quantize[int8-minmax-per_channel=true]"
    _, execution, outcome, _, _ = run_search(tmp_path, monkeypatch, fail={failing})
    bad = outcome.candidates["int8-minmax-per_channel=true"]
    assert bad.state is search_mod.CandidateState.FAILED
    assert execution.runs["compile@host-cpu[int8-minmax-per_channel=false]"].outcome \
        is Outcome.BUILT
    assert outcome.chosen is not None and outcome.chosen != "int8-minmax-per_channel=true"


def test_a_failed_shared_stage_stops_every_candidate(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, execution, outcome, log, _ = run_search(tmp_path, monkeypatch, fail={"onnx-optimize"})
    assert len(log) == 1  # nothing after the shared wave
    assert outcome.chosen is None
    assert execution.runs["compile@host-cpu[fp32]"].outcome is Outcome.SKIPPED


def test_time_budget_leaves_later_candidates_not_tried(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "m.onnx").write_bytes(b"onnx")
    np.savez(tmp_path / "d.npz", x=np.zeros((2, 4), np.float32))
    ticks = iter([0.0, 0.0, 30.0, 61.0, 62.0, 63.0, 64.0, 65.0, 66.0, 67.0])
    text = RECIPE.replace("max_candidates: 8", "max_candidates: 8\n      max_minutes: 1")
    _, execution, outcome, log, _ = run_search(tmp_path, monkeypatch, text,
                                               clock=lambda: next(ticks))
    states = {n: c.state.value for n, c in outcome.candidates.items()}
    assert states["fp32"] == "passed" or states["fp32"] == "chosen"
    assert states["basic"] in ("passed", "chosen")
    assert [s for s in states.values() if s == "not-tried"] == ["not-tried"] * 4
    run = execution.runs["compile@host-cpu[int8-minmax-per_channel=true]"]
    assert run.outcome is Outcome.SKIPPED and "time budget (max_minutes: 1)" in run.message
    assert "2 of 6 candidates tried" in outcome.message
    assert len(log) == 1 + 2 + 1


# -- selection -----------------------------------------------------------------------


def test_rank_picks_the_lowest_median_and_gives_ratios_with_intervals() -> None:
    rng = np.random.default_rng(0)
    drift = 1 + 0.3 * rng.random((20, 1))  # the machine's speed changes round to round
    fast = 1.0 * drift + rng.normal(0, 0.01, (20, 10))
    slow = 1.3 * drift + rng.normal(0, 0.01, (20, 10))
    tie = 1.0 * drift + rng.normal(0, 0.01, (20, 10))
    ranking = rank(np.stack([slow, fast, tie]), ["slow", "fast", "tie"])
    assert ranking.chosen in ("fast", "tie")
    by_name = {s.name: s for s in ranking.standings}
    assert by_name["slow"].slower and 1.25 < by_name["slow"].ratio < 1.35
    assert by_name["slow"].low > 1.2
    other = "tie" if ranking.chosen == "fast" else "fast"
    assert not by_name[other].slower and ranking.tied == [other]
    assert ranking.standings[0].name == ranking.chosen


def test_rank_over_profiles_weighs_each_profile_the_same() -> None:
    """'big' wins the large profile by 20 % but loses the small one by 50 %: the summed
    milliseconds would pick it (the large profile dominates), the geometric mean does
    not. The small profile ran 5x more rounds; the ratio pools as many from each."""
    rng = np.random.default_rng(1)

    def blocks(ms: float, rounds: int) -> np.ndarray:
        return ms * (1 + rng.normal(0, 0.01, (rounds, 10)))

    small = np.stack([blocks(1.0, 100), blocks(1.5, 100)])  # [even, big]
    large = np.stack([blocks(50.0, 20), blocks(40.0, 20)])
    ranking = rank({"small": small, "large": large}, ["even", "big"])
    assert ranking.chosen == "even"  # geometric means: even 7.07 ms, big 7.75 ms
    assert ranking.rounds == 40  # 20 + 20: the small profile's extra rounds left out
    assert [s.name for s in ranking.standings] == ["even", "big"]
    big = ranking.standings[1]
    assert big.name == "big" and big.median_ms == pytest.approx(1.5, rel=0.01)
    assert big.profiles["large"]["median_ms"] == pytest.approx(40, rel=0.01)
    assert 0.75 < big.ratio < 1.55  # half the rounds at 1.5x, half at 0.8x
    record = ranking.record()
    row = record.candidates[1]
    assert row.profiles is not None and set(row.profiles) == {"small", "large"}
    stored = json.loads(json.dumps(record.to_json()))
    assert SelectionRecord.model_validate(stored) == record  # the cache's round trip


def test_round_robin_rotates_who_goes_first() -> None:
    calls: list[str] = []
    runs = [lambda: calls.append("a"), lambda: calls.append("b"), lambda: calls.append("c")]
    settings = MeasureSettings(warmup_iterations=1, min_iterations=10, min_seconds=0)
    blocks = time_blocks(runs, settings)
    assert blocks.shape == (3, 8, 10)
    timed = calls[3:]
    firsts = [timed[i * 30] for i in range(8)]
    assert firsts[:3] == ["a", "b", "c"]


def test_pareto_front() -> None:
    points = {"fp32": (10.0, 100.0), "int8": (5.0, 73.0), "mixed": (7.0, 100.0),
              "slow-bad": (12.0, 90.0), "fast-ok": (5.0, 96.0)}
    assert pareto_front(points) == {"mixed", "fast-ok"}


def test_plan_and_validate_of_a_search_stay_light(tiny_project: Callable[..., Path]) -> None:
    from tests.conftest import TINY_RECIPE
    from tests.unit.test_light_imports import loaded_heavy

    recipe = tiny_project(TINY_RECIPE.replace("      size: {max_mb: 1}\n", """\
      size: {max_mb: 1}
    search:
      candidates:
        fp32: {}
        int8:
          passes: [quantize: {mode: static, calibration: samples}]
          grid: {quantize.method: [minmax, entropy]}
"""))
    for argv in (["plan", str(recipe)], ["validate", str(recipe)],
                 ["plan", str(recipe), "--format", "json"]):
        code, heavy, output = loaded_heavy(argv)
        assert code == 0, output
        assert heavy == [], argv
    code, _, output = loaded_heavy(["plan", str(recipe)])
    assert "search  host-cpu: 3 candidates" in output
    assert "to-run  int8-entropy" in output
