"""GateResult: truthy when passed, and carries everything needed to explain itself."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, Field


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
