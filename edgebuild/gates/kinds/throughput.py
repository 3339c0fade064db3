"""The throughput gate: inferences per second with several requests in flight.

    measure-throughput stage ─▶ Throughput record ─▶ judge_throughput ─▶ throughput
"""

from __future__ import annotations

from pathlib import Path

from edgebuild.gates.kind import (
    GateKind,
    TargetRecords,
    blocked_by,
    unreadable,
)
from edgebuild.gates.result import GateResult
from edgebuild.measure.record import RecordError, Throughput, read_record
from edgebuild.recipe.models import Gates, Policy


class ThroughputKind(GateKind):
    key = "throughput"

    def evaluate(self, target: str, gates: Gates, records: TargetRecords, policy: Policy,
                 keep_samples: bool, memo: Path | None) -> list[GateResult]:
        if gates.throughput is None:
            return []
        return [_throughput(target, gates, records, policy)]


def _throughput(target: str, gates: Gates, records: TargetRecords, policy: Policy
                ) -> GateResult:
    from edgebuild.gates.throughput import judge_throughput

    assert gates.throughput is not None
    run = records.run(records.throughput)
    blocked = blocked_by(target, "throughput", run, policy)
    if blocked is not None:
        return blocked
    assert run and run.artifact
    try:
        record = read_record(Throughput, run.artifact.metadata, run.stage_id)
    except RecordError as exc:
        return unreadable(target, "throughput", exc)
    return judge_throughput(target, gates.throughput, record, policy)
