"""GateKind: one kind of gate (accuracy, latency, …) behind one protocol.

Each kind is one module in `gates/kinds/` and one entry in `KINDS`; `evaluate_target`
knows none of them by name, and the search asks the kind for its failure sentence:

    recipe Gates ─▶ evaluate_target ─▶ for kind in KINDS: kind.evaluate(…) ─▶ [GateResult]
                                                 run/search ─▶ kind.failure(result) ─▶ "p90 …"

Also here: the prologue every kind shares (its stage did not run, could not measure,
or left an unreadable record). A kind reads the target's `TargetRecords`
(gates/records.py), which the driver makes of the run's results and the plan's stages.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from edgebuild.gates.records import StageOutcome, StageRecord, TargetRecords
from edgebuild.gates.result import GateResult, GateStatus
from edgebuild.measure.record import RecordError
from edgebuild.recipe.models import Gates, Policy, Unmeasurable

__all__ = ["GateKind", "StageRecord", "TargetRecords", "blocked_by", "not_run", "passed_if",
           "unreadable"]


class GateKind(Protocol):
    """What `evaluate_target` and the search ask of one kind of gate."""

    key: str  # the result's gate name, before any `[…]`: "latency" for latency[short]

    def evaluate(self, target: str, gates: Gates, records: TargetRecords, policy: Policy,
                 keep_samples: bool, memo: Path | None) -> list[GateResult]:
        """This kind's results for one target: none when its gate is not set."""
        ...

    def failure(self, result: GateResult) -> str:
        """The part of a result's message that says what failed (a search candidate's
        reason); by default the whole message."""
        return result.message


def passed_if(ok: bool) -> GateStatus:
    return GateStatus.PASSED if ok else GateStatus.FAILED


def not_run(target: str, gate: str, run: StageRecord | None) -> GateResult:
    why = f"stage '{run.stage_id}' {run.outcome.value}" if run else "its stage did not run"
    return GateResult(target=target, gate=gate, status=GateStatus.NOT_RUN,
                      counts_as_failure=True, message=f"nothing measured: {why}")


def blocked_by(target: str, gate: str, run: StageRecord | None, policy: Policy
               ) -> GateResult | None:
    """A result when the measuring stage produced nothing, else None."""
    if run is not None and run.outcome is StageOutcome.UNMEASURABLE:
        fails = policy.unmeasurable is Unmeasurable.FAIL
        return GateResult(
            target=target, gate=gate, status=GateStatus.UNMEASURABLE, counts_as_failure=fails,
            message=f"{run.message} (policy.unmeasurable: {policy.unmeasurable.value})")
    if run is None or run.artifact is None:
        return not_run(target, gate, run)
    return None


def unreadable(target: str, gate: str, exc: RecordError) -> GateResult:
    """A gate whose measurement record cannot be read: it fails, saying why."""
    return GateResult(target=target, gate=gate, status=GateStatus.FAILED,
                      counts_as_failure=True, details={"hint": exc.hint},
                      message=f"cannot read the measurement: {exc.message}")
