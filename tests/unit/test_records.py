"""The typed records that cross a process boundary: a stage's result (core/stage_result.py)
and the measurement records (measure/record.py). Round trips keep the JSON the cache
holds; malformed ones from a worker, a device tool or the cache are clear errors."""

from __future__ import annotations

import json
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from edgebuild.cache.store import Store
from edgebuild.core.artifact import UNTRUSTED, Artifact
from edgebuild.core.stage_result import StageResult
from edgebuild.execute.result import ExecutionResult, Outcome, StageRun
from edgebuild.execute.scheduler import Scheduler, _Started
from edgebuild.execute.task import TaskOutcome
from edgebuild.gates.kinds.latency import _latency
from edgebuild.gates.kinds.paired import _paired
from edgebuild.gates.records import TargetRecords
from edgebuild.gates.result import GateStatus
from edgebuild.measure.conditions import conditions
from edgebuild.measure.record import (
    ComparisonRecord,
    LatencyFigures,
    LatencyRecord,
    RecordError,
    SelectionRecord,
    Standing,
    malformed_record,
    read_record,
)
from edgebuild.measure.stats import summarize
from edgebuild.plan.planner import TargetStages
from edgebuild.plan.stage import Stage
from edgebuild.recipe.common import MeasureSettings
from edgebuild.recipe.models import LatencyGate, Policy
from edgebuild.run.records import target_records


def host_figures() -> dict[str, Any]:
    """What measure-latency stores for one timing on this host, as plain JSON."""
    samples = np.linspace(1.0, 2.0, 60)
    before = conditions(2)
    return {**summarize(samples), "conditions": {
        **before, "load_average_after": before["load_average"], "others_busy_share": 0.02,
        "settings": MeasureSettings().model_dump()},
        "output_shapes": {"y": [1, 3]}, "where": ""}


def stored(data: dict[str, Any]) -> dict[str, Any]:
    """`data` as it comes back from latency.json or the artifact's manifest."""
    return json.loads(json.dumps(data))


def test_latency_record_round_trips_as_the_cache_holds_it() -> None:
    raw = stored(host_figures())
    record = read_record(LatencyRecord, raw, "measure-latency@host-cpu")
    assert record.p50 == pytest.approx(1.5) and record.n == 60
    assert record.conditions is not None and record.conditions.threads == 2
    assert record.p99_ci95 is not None and record.p99_ci95[1] is None  # 60 runs: unbounded
    assert stored(record.to_json()) == raw  # no field added, none lost, same values
    assert (record.profile, record.memory, record.throughput) == (None, None, None)


def test_profiles_untrusted_and_the_scheduler_keys() -> None:
    row = {key: value for key, value in host_figures().items() if key != "where"}
    raw = stored({"where": "host", "profiles": {
        "small": {**row, "shapes": {"x": [1, 4]}},
        "huge": {"shapes": {"x": [1, 4096]}, "error": "the artifact fails at shapes",
                 "hint": "keep the dimension dynamic"},
        "phone": {"unmeasurable": "not measurable here: built shape only"}},
        UNTRUSTED: "not cached: busy"})
    # The scheduler adds main, stage, op and seconds to what the stage returned.
    metadata = {**raw, "main": "latency.json", "stage": "s", "op": "measure-latency",
                "seconds": 1.0}
    record = read_record(LatencyRecord, metadata, "s")
    assert record.profiles is not None and record.untrusted == "not cached: busy"
    assert [p for p, r in record.profiles.items() if r.refused] == ["huge", "phone"]
    assert record.profiles["small"].at(90)[0] == pytest.approx(1.9)
    assert stored(record.to_json()) == raw
    assert UNTRUSTED in LatencyRecord.model_fields  # Artifact.untrusted reads this field


def test_records_cached_before_the_types_are_read() -> None:
    """trtexec's layer times were `layers`, benchmark_model's memory `memory_mb`."""
    record = LatencyRecord.model_validate({
        "n": 200, "p50": 3.1, "tool": "trtexec --loadEngine=model.engine",
        "layers": [{"count": 200}, {"name": "conv1", "averageMs": 0.4, "percentage": 12.9}],
        "memory_mb": {"init": 7.4, "overall": 7.8, "peak": 9.1}})
    assert record.profile is not None and record.profile[1]["name"] == "conv1"
    assert record.memory is not None and record.memory.peak_mb == 9.1
    assert "layers" not in record.to_json() and record.to_json()["memory"]["init_mb"] == 7.4


@pytest.mark.parametrize(("metadata", "field"), [
    ({"n": 10, "p50": "fast"}, "p50"),
    ({"n": 10, "p50": 1.0, "conditions": {"cpu": "x", "load": 3}}, "conditions.load"),
    ({"n": 10, "p50": 1.0, "p50_ci95": [1.0]}, "p50_ci95.1"),
    ({"profiles": {"a": {"p90": []}}}, "profiles.a.p90"),
    ({"n": 10, "p50": 1.0, "surprise": True}, "surprise"),
    ({"memory_mb": 12}, "memory_mb"),
])
def test_a_malformed_latency_record_names_its_field(metadata: dict[str, Any],
                                                    field: str) -> None:
    with pytest.raises(RecordError) as err:
        read_record(LatencyRecord, metadata, "the phone's benchmark_model")
    message = err.value.message
    assert message.startswith("the phone's benchmark_model: a malformed LatencyRecord (")
    assert f"({field}: " in message and "\n" not in message
    assert malformed_record("latency", metadata).startswith(f"{field}: ")


def test_only_the_measurement_formats_have_records() -> None:
    assert malformed_record("onnx", {"anything": object()}) == ""
    assert malformed_record("selection", {"chosen": "a"}).startswith("rounds: ")
    assert malformed_record("latency-comparison", {"blocks": 4, "baseline_p50": 1.0,
                                                   "candidate_p50": 1.1}) == ""


def test_comparison_and_selection_round_trip() -> None:
    pair = {"blocks": 12, "baseline_p50": 1.0, "candidate_p50": 1.2,
            "baseline_output_shapes": {"y": [1, 3]}, "candidate_output_shapes": {"y": [1, 3]},
            "conditions": {"cpu": "AMD EPYC", "cores": 2, "threads": None,
                           "load_average_after": [0.5, 0.5, 0.5]}}
    compared = read_record(ComparisonRecord, stored(pair), "compare-latency@t")
    assert compared.paired() == {"baseline_p50": 1.0, "candidate_p50": 1.2}
    assert stored(compared.to_json()) == pair
    selection = SelectionRecord(chosen="a", rounds=16, tied=["b"], candidates=[
        Standing(name="a", median_ms=1.0, p90_ms=1.1, ratio=1.0, ci95=(1.0, 1.0),
                 slower=False),
        Standing(name="b", median_ms=1.01, p90_ms=1.2, ratio=1.01, ci95=(0.98, 1.04),
                 slower=False, profiles={"small": {"median_ms": 1.01, "p90_ms": 1.2}})])
    again = read_record(SelectionRecord, stored(selection.to_json()), "select@t")
    assert again == selection and again.standing("b") == selection.candidates[1]
    with pytest.raises(RecordError, match="two medians"):
        ComparisonRecord(blocks=3).paired()


def test_stage_result_round_trips_and_refuses_a_malformed_one() -> None:
    done = StageResult.ok("latency.json", "latency", {"p50": 1.0}, 2.5)
    assert StageResult.parse(json.dumps(done.model_dump()), "w") == done
    assert StageResult.parse(done.model_dump(mode="json"), "w") == done
    gone = StageResult.unmeasurable("not measurable here: no phone", "plug it in")
    assert StageResult.parse(gone.model_dump(), "w").why == "not measurable here: no phone"
    for raw, field in [(b"{not json", "the record"), ({"status": "fine"}, "status"),
                       ({"status": "ok", "format": "latency"}, "the record"),
                       ({"status": "ok", "main": "m", "format": "../x", "seconds": 1},
                        "format"),
                       ({"status": "error", "message": 3}, "message"),
                       ({"status": "error", "secret": "x"}, "secret")]:
        result = StageResult.parse(raw, "worker tcp://10.0.0.9:1")
        assert result.status == "error", raw
        assert result.message.startswith("the result worker tcp://10.0.0.9:1 sent is "
                                         "malformed: "), result.message
        assert field in result.message and "\n" not in result.message
        assert result.hint


def _finish(tmp_path: Path, result: StageResult) -> StageRun:
    """The scheduler's handling of one measure-latency task's result."""
    store = Store(tmp_path / "cache")
    scheduler = Scheduler(store, None, tmp_path / "logs")  # type: ignore[arg-type]
    stage = Stage("measure-latency@t", "measure-latency", "{}", target="t", measures=True)
    key = "ab" * 32
    work = store.begin(key)
    (work / "latency.json").write_text("{}")
    future: Future[TaskOutcome] = Future()
    future.set_result(TaskOutcome(result, time.time(), time.time()))
    started = _Started(stage, key, work, tmp_path / "s.log", {}, time.perf_counter())
    return scheduler._finish(started, future)


def test_the_scheduler_refuses_a_malformed_record_from_a_worker(tmp_path: Path) -> None:
    run = _finish(tmp_path, StageResult.ok("latency.json", "latency",
                                           {"n": "many", "p50": 1.0}, 0.5))
    assert run.outcome is Outcome.FAILED and run.artifact is None
    assert run.message == "the stage returned a malformed latency record: n: Input should " \
                          "be a valid integer, unable to parse string as an integer"
    good = _finish(tmp_path / "2", StageResult.ok("latency.json", "latency",
                                                  stored(host_figures()), 0.5))
    assert good.outcome is Outcome.BUILT and good.artifact is not None
    assert good.artifact.metadata["op"] == "measure-latency"
    assert read_record(LatencyRecord, good.artifact.metadata, "s").n == 60


def _cached(metadata: dict[str, Any], stage_id: str) -> TargetRecords:
    stage = Stage(stage_id, stage_id.split("@")[0], "{}", target="t", measures=True)
    artifact = Artifact("cd" * 32, "latency", Path(), {}, {}, metadata)
    stages = TargetStages(compiled="c", latency="measure-latency@t", compare="compare-latency@t")
    return target_records(stages, ExecutionResult(
        {stage_id: StageRun(stage, Outcome.CACHED, artifact=artifact)}))


def test_a_malformed_cached_record_fails_its_gate_with_a_sentence() -> None:
    gate = LatencyGate(budget_ms=5.0)
    (result,) = _latency("t", gate, _cached(
        {"p50": {"value": 1.0}, "n": 3}, "measure-latency@t"), Policy())
    assert result.status is GateStatus.FAILED and result.counts_as_failure
    assert result.message.startswith("cannot read the measurement: measure-latency@t: a "
                                     "malformed LatencyRecord (p50: ")
    fine = _latency("t", gate, _cached(
        stored(host_figures()), "measure-latency@t"), Policy())
    assert [r.status for r in fine] == [GateStatus.PASSED]
    (paired,) = _paired("t", "regression", "compare-latency@t", _cached(
        {"blocks": 4}, "compare-latency@t"), Policy(), lambda *args: pytest.fail("judged"))
    assert paired.status is GateStatus.FAILED and "two medians" in paired.message


def test_figures_at_a_percentile_and_the_measured_subset() -> None:
    figures = LatencyFigures(n=5, mean=1.0, p50=0.9, p50_ci95=(0.8, None))
    assert figures.at(50) == (0.9, (0.8, None)) and figures.at(99) == (None, None)
    assert figures.figures(("p50", "p90", "n")) == {"p50": 0.9, "n": 5}
