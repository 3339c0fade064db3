"""The `throughput` gate, judged from measure-throughput's record (measuring/throughput.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from edgebuild.gates import noisy

if TYPE_CHECKING:
    from edgebuild.gates.result import GateResult
    from edgebuild.measure.record import Throughput
    from edgebuild.recipe.models import Policy, ThroughputGate


def judge_throughput(target: str, gate: ThroughputGate, record: Throughput,
                     policy: Policy) -> GateResult:
    """The `throughput` gate from measure-throughput's record."""
    from edgebuild.gates.result import GateResult, GateStatus
    from edgebuild.recipe.models import OnNoisy, Undecided

    ok = record.fps >= gate.min_fps
    latency = (f"; one request {record.p50:.3g} ms p50, {record.p90:.3g} ms p90"
               if record.p50 is not None and record.p90 is not None else "")
    how = f" ({record.how})" if record.how else ""
    where = f" [{record.where}]" if record.where else ""
    figure = (f"{record.fps:.1f} inferences/s with {record.streams} in flight{how}{latency}"
              f"{where}")
    busy = record.conditions.busy if record.conditions is not None else None
    status, fails = (GateStatus.PASSED, False) if ok else (GateStatus.FAILED, True)
    message = f"{figure}, {'at least' if ok else 'below'} the {gate.min_fps:g}/s minimum"
    load = (noisy.machine_load(record.conditions.as_dict()) if record.conditions is not None
            else None)
    if not ok and busy and load is not None and record.fps * load.slowdown < gate.min_fps:
        # Load only slows: an FPS the most plausible slowdown cannot lift to the minimum
        # proves a miss on a quiet machine too (gates/noisy.py).
        message = (f"{message}; {gate.min_fps / max(record.fps, 1e-9):.3g}× short, more "
                   f"than the {load.slowdown:.1f}× that load ({load.sentence()}) can explain")
    elif not ok and busy and gate.on_noisy is OnNoisy.UNDECIDED:
        status, fails = GateStatus.UNDECIDED, policy.undecided is Undecided.FAIL
        message = (f"undecided, the machine was busy ({busy}): {figure}, below the "
                   f"{gate.min_fps:g}/s minimum (policy.undecided: {policy.undecided.value})")
    measured = {"fps": round(record.fps, 2), "streams": record.streams,
                **({"p50": record.p50, "p90": record.p90} if record.p50 is not None else {})}
    return GateResult(target=target, gate="throughput", status=status, counts_as_failure=fails,
                      measured=measured, limits={"min_fps": gate.min_fps}, message=message,
                      details={"throughput": record.to_json()})
