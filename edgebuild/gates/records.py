"""TargetRecords: what the gate kinds read of one target's run, handed over by the driver.

Gates never import `execute` or `plan`: the driver (run/records.py) turns the run's
`ExecutionResult` and the planner's `TargetStages` into these plain records, and the
kinds (gates/kinds/) read only them:

    TargetStages + ExecutionResult ─▶ run/records.target_records ─▶ TargetRecords
                                                   evaluate_target ─▶ kind.evaluate(…)

Only what the kinds read is here: per stage its id, outcome, message and artifact (the
files and metadata a kind opens), and the stage ids the planner gave each measurement.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from edgebuild.core.artifact import Artifact


class StageOutcome(StrEnum):
    """How a stage ended, as the gates read it (the values of execute's `Outcome`)."""

    CACHED = "cached"
    BUILT = "built"
    FAILED = "failed"
    SKIPPED = "skipped"
    UNMEASURABLE = "unmeasurable"


@dataclass(frozen=True)
class StageRecord:
    """One stage of the target as it ended: its artifact only when it produced one."""

    stage_id: str
    outcome: StageOutcome
    message: str = ""
    artifact: Artifact | None = None


@dataclass(frozen=True)
class TargetRecords:
    """One target's (or search candidate's) stage ids by measurement, and the records of
    those of them that ran; a planned stage with no record did not run."""

    compiled: str  # the compile stage (a search target's: its select stage)
    chain: list[str] = field(default_factory=list)  # the target's pass stages, in order
    references: dict[str, str] = field(default_factory=dict)  # dataset -> FP32 reference
    infers: dict[str, str] = field(default_factory=dict)  # dataset -> the artifact's infer
    latency: str | None = None
    compare: str | None = None  # A/B latency against a baseline artifact
    speedup: str | None = None  # A/B latency against another target's build
    throughput: str | None = None
    runs: dict[str, StageRecord] = field(default_factory=dict)

    def run(self, stage_id: str | None) -> StageRecord | None:
        """The record of a planned stage; None when it is not planned or did not run."""
        return self.runs.get(stage_id or "")
