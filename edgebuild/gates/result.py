"""GateResult: truthy when passed, and carries everything needed to explain itself."""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

if TYPE_CHECKING:
    from edgebuild.fidelity.judgement import Judgement


class GateStatus(StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    UNMEASURABLE = "unmeasurable"  # this machine cannot measure it; policy decides
    NOT_RUN = "not-run"  # a stage it depends on failed
    UNDECIDED = "undecided"  # measured, but too noisy (or no baseline) to decide: warns


class GateResult(BaseModel):
    target: str
    gate: str  # accuracy | latency | size
    status: GateStatus
    counts_as_failure: bool = Field(description="Whether this result fails the run.")
    measured: dict[str, float] = Field(default_factory=dict)
    limits: dict[str, float] = Field(default_factory=dict)
    details: dict[str, Any] = Field(default_factory=dict)
    message: str = Field(description="One human sentence.")

    @classmethod
    def judged(cls, target: str, gate: str, judgement: Judgement) -> GateResult:
        """An accuracy gate's result: its judgement (fidelity/verdict.py) as it stands."""
        return cls(target=target, gate=gate, status=GateStatus.PASSED if judgement.passed
                   else GateStatus.FAILED, counts_as_failure=not judgement.passed,
                   measured=judgement.measured, limits=judgement.limits,
                   details=judgement.details, message=judgement.message)

    def __bool__(self) -> bool:
        return not self.counts_as_failure

    @property
    def busy(self) -> bool:
        """Not timed because other processes kept the CPU busy (after waiting for quiet):
        the machine's state, not the build's verdict."""
        return self.status is GateStatus.UNMEASURABLE and bool(self.details.get("busy"))

    @property
    def is_latency(self) -> bool:
        """`latency`, or one shape profile's `latency[<profile>]`."""
        return self.gate == "latency" or self.gate.startswith("latency[")

    @property
    def name(self) -> str:
        return f"{self.target}.{self.gate}"
