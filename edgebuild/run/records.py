"""The hand-over to the gates: a target's planned stages and their runs as `TargetRecords`.

The driver and the search evaluate gates through here, so `gates/` reads typed records
and never imports `execute` or `plan` (gates/records.py):

    plan's TargetStages ──┐
                          ├─▶ target_records ─▶ TargetRecords ─▶ evaluate_target
    ExecutionResult.runs ─┘     (only the target's own stages)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from edgebuild.gates.records import StageOutcome, StageRecord, TargetRecords

if TYPE_CHECKING:
    from edgebuild.execute.result import ExecutionResult
    from edgebuild.plan.planner import TargetStages


def target_records(stages: TargetStages, execution: ExecutionResult) -> TargetRecords:
    """What the gates read of one target's (or candidate's) `stages` in `execution`."""
    ids = [stages.compiled, *stages.chain, *stages.references.values(),
           *stages.infers.values(), stages.latency, stages.compare, stages.speedup,
           stages.throughput]
    runs = {}
    for stage_id in ids:
        run = execution.runs.get(stage_id or "")
        if stage_id is not None and run is not None:
            runs[stage_id] = StageRecord(run.stage.id, StageOutcome(run.outcome.value),
                                             run.message, run.artifact)
    return TargetRecords(
        compiled=stages.compiled, chain=list(stages.chain),
        references=dict(stages.references), infers=dict(stages.infers),
        latency=stages.latency, compare=stages.compare, speedup=stages.speedup,
        throughput=stages.throughput, runs=runs)
