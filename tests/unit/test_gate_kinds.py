"""The gate kinds (gates/kinds/): their order, the search's failure sentence each words, and
the records the driver hands them (run/records.py)."""

from __future__ import annotations

import pytest

from edgebuild.execute.result import ExecutionResult, Outcome, StageRun
from edgebuild.gates.kinds import KINDS, failure
from edgebuild.gates.records import StageOutcome, StageRecord
from edgebuild.gates.result import GateResult, GateStatus
from edgebuild.plan.planner import TargetStages
from edgebuild.plan.stage import Stage
from edgebuild.run.records import target_records


def test_the_kinds_report_in_the_order_report_json_keeps() -> None:
    assert [k.key for k in KINDS] == ["accuracy", "latency", "regression", "speedup",
                                      "throughput", "size", "memory"]


def _before(gate: GateResult) -> str:
    """run/search.py's `_failure` before each kind worded its own: the sentences must not
    change."""
    if gate.is_latency and gate.status is GateStatus.FAILED and gate.measured:
        key = f"p{int(gate.limits['percentile'])}"
        return f"{key} {gate.measured[key]:.3g} ms > {gate.limits['budget_ms']:g} ms"
    if gate.gate.startswith("accuracy") and gate.status is GateStatus.FAILED:
        from edgebuild.fidelity.limits import LIMITS

        found = []
        for key, limit in gate.limits.items():
            check = LIMITS[key]
            value = gate.measured.get(check.metric)
            if value is None:
                found.append(f"{check.metric} not measurable")
            elif not check.met(value, limit):
                found.append(check.missed(value, limit))
        return "; ".join(found) or gate.message
    return gate.message


def _result(gate: str, status: GateStatus, measured: dict[str, float] | None = None,
            limits: dict[str, float] | None = None) -> GateResult:
    return GateResult(target="t", gate=gate, status=status, counts_as_failure=True,
                      measured=measured or {}, limits=limits or {}, message=f"{gate}: said")


LATENCY = {"p90": 12.345, "p50": 3.0}
LIMITS = {"budget_ms": 10.0, "percentile": 90}
ACCURACY = {"min_top1_agreement": 99.0, "min_cosine": 0.999}


@pytest.mark.parametrize("result", [
    _result("latency", GateStatus.FAILED, LATENCY, LIMITS),
    _result("latency[short]", GateStatus.FAILED, LATENCY, LIMITS),
    _result("latency", GateStatus.FAILED),  # nothing measured: the message
    _result("latency", GateStatus.UNDECIDED, LATENCY, LIMITS),
    _result("accuracy", GateStatus.FAILED, {"top1_agreement": 90.0, "cosine": 0.9}, ACCURACY),
    _result("accuracy[x:y]", GateStatus.FAILED, {"cosine": 0.9}, ACCURACY),
    _result("accuracy", GateStatus.FAILED, {"top1_agreement": 100.0, "cosine": 1.0}, ACCURACY),
    _result("accuracy", GateStatus.UNMEASURABLE),
    _result("regression[short]", GateStatus.FAILED, {"ratio": 1.3}),
    _result("speedup", GateStatus.UNDECIDED),
    _result("throughput", GateStatus.FAILED),
    _result("size", GateStatus.FAILED, {"mb": 3.0}, {"max_mb": 1.0}),
    _result("memory", GateStatus.NOT_RUN),
    _result("not-a-kind", GateStatus.FAILED),
], ids=lambda r: f"{r.gate}-{r.status.value}-{len(r.measured)}")
def test_each_kind_words_its_failure_as_the_search_did(result: GateResult) -> None:
    assert failure(result) == _before(result)


def test_the_driver_hands_over_the_targets_own_stages() -> None:
    ours, theirs = (Stage(f"measure-latency@{t}", "measure-latency", "{}", target=t,
                          measures=True) for t in ("t", "u"))
    execution = ExecutionResult({s.id: StageRun(s, Outcome.UNMEASURABLE, message="no device")
                                 for s in (ours, theirs)})
    records = target_records(TargetStages(compiled="compile@t", latency=ours.id), execution)
    assert records.runs == {ours.id: StageRecord(ours.id, StageOutcome.UNMEASURABLE,
                                                 "no device")}
    assert records.run(records.latency) is records.runs[ours.id]
    assert records.run(records.compiled) is None and records.run(records.compare) is None
    assert [o.value for o in StageOutcome] == [o.value for o in Outcome]
