"""The memory gate: the runtime's peak memory for load + inference, which the latency
stage records beside its timings.

    measure-latency stage ─▶ LatencyRecord.memory ─▶ memory
"""

from __future__ import annotations

from pathlib import Path

from edgebuild.gates.kind import (
    GateKind,
    TargetRecords,
    blocked_by,
    passed_if,
    unreadable,
)
from edgebuild.gates.result import GateResult, GateStatus
from edgebuild.measure.record import LatencyRecord, RecordError, read_record
from edgebuild.recipe.models import Gates, MemoryGate, Policy, Unmeasurable


class MemoryKind(GateKind):
    key = "memory"

    def evaluate(self, target: str, gates: Gates, records: TargetRecords, policy: Policy,
                 keep_samples: bool, memo: Path | None) -> list[GateResult]:
        if gates.memory is None:
            return []
        return [_memory(target, gates.memory, records, policy)]


def _memory(target: str, gate: MemoryGate, records: TargetRecords, policy: Policy
            ) -> GateResult:
    """Judged like the size gate, from the peak memory measure-latency recorded; a backend
    or host that cannot measure it is unmeasurable (the policy decides), never a pass."""
    run = records.run(records.latency)
    blocked = blocked_by(target, "memory", run, policy)
    if blocked is not None:
        return blocked
    assert run and run.artifact
    try:
        memory = read_record(LatencyRecord, run.artifact.metadata, run.stage_id).memory
    except RecordError as exc:
        return unreadable(target, "memory", exc)
    limits = {"max_mb": gate.max_mb}
    if memory is None or memory.peak_mb is None:
        why = (memory.unmeasurable if memory is not None and memory.unmeasurable else
               "not measurable here: the measurement recorded no peak memory")
        return GateResult(
            target=target, gate="memory", status=GateStatus.UNMEASURABLE,
            counts_as_failure=policy.unmeasurable is Unmeasurable.FAIL, limits=limits,
            message=f"{why} (policy.unmeasurable: {policy.unmeasurable.value})")
    ok = memory.peak_mb <= gate.max_mb
    return GateResult(
        target=target, gate="memory", status=passed_if(ok), counts_as_failure=not ok,
        measured={"peak_mb": memory.peak_mb}, limits=limits,
        details={"memory": memory.to_json()},
        message=f"runtime peak {memory.peak_mb:.1f} MB for load + inference "
                f"({'within' if ok else 'over'} the {gate.max_mb:g} MB limit)"
                + (f"; with the Python process around it {memory.process_peak_mb:.0f} MB"
                   if memory.process_peak_mb is not None else ""))
