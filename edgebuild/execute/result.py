"""What executing a plan produced: one StageRun per stage."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgebuild.core.artifact import Artifact
from edgebuild.plan.stage import Stage

if TYPE_CHECKING:
    from edgebuild.plan.planner import Plan


class Outcome(StrEnum):
    CACHED = "cached"
    BUILT = "built"
    FAILED = "failed"
    SKIPPED = "skipped"  # an upstream stage failed, or fail-fast stopped the run
    UNMEASURABLE = "unmeasurable"


@dataclass
class StageRun:
    stage: Stage
    outcome: Outcome
    seconds: float = 0.0
    key: str | None = None
    artifact: Artifact | None = None
    message: str = ""
    hint: str = ""
    log: Path | None = None
    started: float = 0.0  # wall clock (time.time) when its worker started, 0 if none
    finished: float = 0.0
    worker: str = ""  # the Dask worker that ran it ('' for this machine)
    # A failed stage's figures (StageError.metadata, e.g. a budget's trials): no artifact
    # holds them, and report.json shows them as the stage's metadata.
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class ExecutionResult:
    runs: dict[str, StageRun] = field(default_factory=dict)

    def count(self, outcome: Outcome) -> int:
        return sum(1 for r in self.runs.values() if r.outcome is outcome)

    @property
    def failed(self) -> list[StageRun]:
        return [r for r in self.runs.values() if r.outcome is Outcome.FAILED]


# ("planned", the plan) once, then ("start", a stage) and ("end", its run) per stage.
Progress = Callable[[str, "StageRun | Stage | Plan"], None]
