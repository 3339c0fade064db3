"""The paired gates, decided on samples timed interleaved, A/B, in one process:
regression (this build against a baseline report's: `run --baseline`) and speedup (this
build against another target's).

    compare-latency stage ─▶ ComparisonRecord ─▶ decide(baseline, candidate) ─▶ regression[…]
    compare-speed stage   ─▶ ComparisonRecord ─▶ decide(over, this)          ─▶ speedup[…]
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from edgebuild.gates.kind import (
    GateKind,
    TargetRecords,
    blocked_by,
    unreadable,
)
from edgebuild.gates.result import GateResult, GateStatus
from edgebuild.measure.record import (
    ComparisonRecord,
    Conditions,
    PairFigures,
    RecordError,
    read_record,
)
from edgebuild.recipe.models import Gates, LatencyGate, Policy, SpeedupGate, Undecided


class RegressionKind(GateKind):
    """Set by the latency gate (`max_regression_pct`) when the run has a baseline."""

    key = "regression"

    def evaluate(self, target: str, gates: Gates, records: TargetRecords, policy: Policy,
                 keep_samples: bool, memo: Path | None) -> list[GateResult]:
        if gates.latency is None or records.compare is None:
            return []
        return _regression(target, gates.latency, records, policy)


class SpeedupKind(GateKind):
    key = "speedup"

    def evaluate(self, target: str, gates: Gates, records: TargetRecords, policy: Policy,
                 keep_samples: bool, memo: Path | None) -> list[GateResult]:
        if gates.speedup is None:
            return []
        return _speedup(target, gates.speedup, records, policy)


def _regression(target: str, gate: LatencyGate, records: TargetRecords, policy: Policy
                ) -> list[GateResult]:
    """One result, `regression`; with shape profiles one per profile."""
    return _paired(target, "regression", records.compare, records, policy,
                   lambda name, folder, suffix, stats, conditions: _compared(
                       target, name, gate, folder, suffix, stats, conditions, policy))


Judge = Callable[[str, Path, str, PairFigures, Conditions | None], GateResult]


def _paired(target: str, gate: str, stage: str | None, records: TargetRecords,
            policy: Policy, judge: Judge) -> list[GateResult]:
    """The gates of an interleaved A/B stage (compare-latency, compare-speed): one, or
    with shape profiles `gate[<profile>]` each; `judge(name, folder, suffix, stats,
    conditions)` decides one from the paired samples `*_ms<suffix>.npy` in `folder`."""
    run = records.run(stage)
    blocked = blocked_by(target, gate, run, policy)
    if blocked is not None:
        return [blocked]
    assert run and run.artifact
    try:
        record = read_record(ComparisonRecord, run.artifact.metadata, run.stage_id)
        if record.profiles is None:
            record.paired()  # a single pair has its figures
    except RecordError as exc:
        return [unreadable(target, gate, exc)]
    if record.profiles is None:
        return [judge(gate, run.artifact.path, "", record, record.conditions)]
    results = []
    for profile, row in record.profiles.items():
        name = f"{gate}[{profile}]"
        if row.error is not None:
            results.append(GateResult(
                target=target, gate=name, status=GateStatus.FAILED, counts_as_failure=True,
                details={"profile": profile, "error": row.error},
                message=f"{profile}: cannot compare at this profile's shapes: {row.error}"))
            continue
        try:
            row.paired()
        except RecordError as exc:
            results.append(unreadable(target, name, exc))
            continue
        result = judge(name, run.artifact.path, f"-{profile}", row, record.conditions)
        result.details["profile"] = profile
        result.message = f"{profile}: {result.message}"
        results.append(result)
    return results


def _compared(target: str, name: str, gate: LatencyGate, folder: Path, suffix: str,
              stats: PairFigures, conditions: Conditions | None, policy: Policy
              ) -> GateResult:
    import numpy as np

    from edgebuild.gates.regression import decide

    verdict = decide(np.load(folder / f"baseline_ms{suffix}.npy"),
                     np.load(folder / f"candidate_ms{suffix}.npy"),
                     gate.max_regression_pct / 100)
    status = {"regression": GateStatus.FAILED, "ok": GateStatus.PASSED,
              "undecided": GateStatus.UNDECIDED}[verdict.decision]
    return GateResult(
        target=target, gate=name, status=status,
        counts_as_failure=verdict.regressed or (status is GateStatus.UNDECIDED
                                                and policy.undecided is Undecided.FAIL),
        measured={"ratio": verdict.ratio, **stats.paired()},
        limits={"max_regression_pct": gate.max_regression_pct},
        details={**verdict.to_json(), "conditions": _as_dict(conditions)},
        message=verdict.sentence())


def _speedup(target: str, gate: SpeedupGate, records: TargetRecords, policy: Policy
             ) -> list[GateResult]:
    """`speedup` (with shape profiles `speedup[<profile>]`): this build against target
    `gate.over`'s, timed interleaved by compare-speed."""
    return _paired(target, "speedup", records.speedup, records, policy,
                   lambda name, folder, suffix, stats, conditions: _faster(
                       target, name, gate, folder, suffix, stats, conditions, policy))


def _faster(target: str, name: str, gate: SpeedupGate, folder: Path, suffix: str,
            stats: PairFigures, conditions: Conditions | None, policy: Policy) -> GateResult:
    """Decided like a regression, on the paired ratio this/over: passing needs the whole
    95 % interval under 1 / min_speedup, failing the whole interval over it."""
    import numpy as np

    from edgebuild.gates.regression import decide

    verdict = decide(np.load(folder / f"baseline_ms{suffix}.npy"),
                     np.load(folder / f"candidate_ms{suffix}.npy"), 1 / gate.min_speedup - 1)
    medians = stats.paired()
    status = {"regression": GateStatus.FAILED, "ok": GateStatus.PASSED,
              "undecided": GateStatus.UNDECIDED}[verdict.decision]
    if verdict.blocks and verdict.ratio == verdict.ratio:  # measured (not NaN)
        figure = (f"{1 / verdict.ratio:.2f}× as fast as {gate.over} [95 % CI "
                  f"{1 / verdict.high:.2f}–{1 / verdict.low:.2f}] over {verdict.blocks} blocks "
                  f"(p50 {medians['candidate_p50']:.3g} vs {medians['baseline_p50']:.3g} ms, "
                  f"interleaved)")
    else:
        figure = f"only {verdict.blocks} blocks of samples; measure longer"
    wanted = f"at least {gate.min_speedup:g}×"
    message = {GateStatus.PASSED: f"{figure}, {wanted}",
               GateStatus.FAILED: f"{figure}; needs {wanted}",
               GateStatus.UNDECIDED: f"undecided, the machine was too noisy: {figure} "
                                     f"straddles {wanted}; re-run on a quieter machine"}[status]
    return GateResult(
        target=target, gate=name, status=status,
        counts_as_failure=status is GateStatus.FAILED or (
            status is GateStatus.UNDECIDED and policy.undecided is Undecided.FAIL),
        measured={"speedup": 1 / verdict.ratio if verdict.ratio else float("nan"), **medians},
        limits={"min_speedup": gate.min_speedup},
        details={**verdict.to_json(), "over": gate.over, "conditions": _as_dict(conditions)},
        message=message)


def _as_dict(conditions: Conditions | None) -> dict[str, Any] | None:
    return conditions.as_dict() if conditions is not None else None
