"""The throughput gate: inferences per second with several requests in flight.

    measure-throughput stage ─▶ Throughput record ─▶ judge_throughput ─▶ throughput
"""

from __future__ import annotations

from pathlib import Path

from edgebuild.gates.kind import (
    ExecutionResult,
    GateKind,
    TargetStages,
    blocked_by,
    unreadable,
)
from edgebuild.gates.result import GateResult
from edgebuild.measure.record import RecordError, Throughput, read_record
from edgebuild.recipe.models import Gates, Policy


class ThroughputKind(GateKind):
    key = "throughput"

    def evaluate(self, target: str, gates: Gates, stages: TargetStages,
                 execution: ExecutionResult, policy: Policy, keep_samples: bool,
                 memo: Path | None) -> list[GateResult]:
        if gates.throughput is None:
            return []
        return [_throughput(target, gates, stages, execution, policy)]


def _throughput(target: str, gates: Gates, stages: TargetStages, execution: ExecutionResult,
                policy: Policy) -> GateResult:
    from edgebuild.gates.throughput import judge_throughput

    assert gates.throughput is not None
    run = execution.runs.get(stages.throughput or "")
    blocked = blocked_by(target, "throughput", run, policy)
    if blocked is not None:
        return blocked
    assert run and run.artifact
    try:
        record = read_record(Throughput, run.artifact.metadata, run.stage.id)
    except RecordError as exc:
        return unreadable(target, "throughput", exc)
    return judge_throughput(target, gates.throughput, record, policy)
