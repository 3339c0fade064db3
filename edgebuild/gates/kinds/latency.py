"""The latency gate: a percentile of the measured latency against its budget, one result
per shape profile; a miss on a loaded machine is judged by what the load can explain.

    measure-latency stage ─▶ LatencyRecord ─┬─▶ latency            (one budget)
                                            └─▶ latency[<profile>] (shape profiles)
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgebuild.cache.memo import remembered
from edgebuild.core.shapes import EXAMPLE
from edgebuild.gates.kind import (
    GateKind,
    TargetRecords,
    blocked_by,
    passed_if,
    unreadable,
)
from edgebuild.gates.noisy import beyond_noise, machine_load, too_noisy
from edgebuild.gates.result import GateResult, GateStatus
from edgebuild.measure.record import LatencyFigures, LatencyRecord, RecordError, read_record
from edgebuild.measure.samples import samples_file, subsample
from edgebuild.recipe.models import Gates, LatencyGate, OnNoisy, Policy, Undecided, Unmeasurable

if TYPE_CHECKING:
    from edgebuild.core.artifact import Artifact


class LatencyKind(GateKind):
    key = "latency"

    def evaluate(self, target: str, gates: Gates, records: TargetRecords, policy: Policy,
                 keep_samples: bool, memo: Path | None) -> list[GateResult]:
        if gates.latency is None:
            return []
        return _latency(target, gates.latency, records, policy, keep_samples, memo)

    def failure(self, result: GateResult) -> str:
        """The percentile over its budget."""
        if result.status is GateStatus.FAILED and result.measured:
            key = f"p{int(result.limits['percentile'])}"
            return f"{key} {result.measured[key]:.3g} ms > {result.limits['budget_ms']:g} ms"
        return result.message


def _latency(target: str, gate: LatencyGate, records: TargetRecords, policy: Policy,
             keep_samples: bool = True, memo: Path | None = None) -> list[GateResult]:
    """One result, `latency`; with shape profiles one per profile, `latency[<profile>]`."""
    run = records.run(records.latency)
    blocked = blocked_by(target, "latency", run, policy)
    if blocked is not None:
        return [blocked]
    assert run and run.artifact
    try:
        record = read_record(LatencyRecord, run.artifact.metadata, run.stage_id)
    except RecordError as exc:
        return [unreadable(target, "latency", exc)]
    where = record.where or ""
    if record.profiles is None and record.unmeasurable is not None:  # a profile, no latency
        return [GateResult(
            target=target, gate="latency", status=GateStatus.UNMEASURABLE,
            counts_as_failure=policy.unmeasurable is Unmeasurable.FAIL,
            details={"where": where},
            message=f"{record.unmeasurable} (policy.unmeasurable: {policy.unmeasurable.value})")]
    if record.profiles is None:
        samples = _kept_samples(run.artifact, "samples_ms.npy", keep_samples, memo)
        budget = gate.budget_for(EXAMPLE)
        assert budget is not None  # the loader checks every profile has one
        return [_latency_from_stats(target, gate, record, policy,
                                    samples,
                                    budget=budget, where=where)]
    results = []
    for profile, row in record.profiles.items():
        name = f"latency[{profile}]"
        budget = gate.budget_for(profile)
        assert budget is not None
        if row.refused:
            results.append(_profile_refused(target, name, profile, row, budget, policy))
            continue
        samples = _kept_samples(run.artifact, samples_file(profile), keep_samples, memo)
        result = _latency_from_stats(
            target, gate, row, policy,
            samples, budget=budget,
            name=name, where=where)
        result.details["profile"] = profile
        result.details["shapes"] = row.shapes or {}
        result.details["output_shapes"] = row.output_shapes or {}
        result.message = f"{profile} {_shapes_text(row.shapes or {})}: {result.message}"
        results.append(result)
    return results


def _shapes_text(shapes: dict[str, list[int]]) -> str:
    return "(" + ", ".join(f"{n} {'×'.join(map(str, s))}" for n, s in shapes.items()) + ")"


def _profile_refused(target: str, name: str, profile: str, row: LatencyFigures,
                     budget: float, policy: Policy) -> GateResult:
    """A profile the artifact cannot run at fails (what it was built for excludes it); one
    this machine cannot time is unmeasurable (the policy decides)."""
    details: dict[str, Any] = {"profile": profile, "shapes": row.shapes or {}}
    if row.unmeasurable is not None:
        return GateResult(
            target=target, gate=name, status=GateStatus.UNMEASURABLE,
            counts_as_failure=policy.unmeasurable is Unmeasurable.FAIL,
            limits={"budget_ms": budget}, details=details,
            message=f"{profile}: {row.unmeasurable} (policy.unmeasurable: "
                    f"{policy.unmeasurable.value})")
    hint = f" ({row.hint})" if row.hint else ""
    return GateResult(
        target=target, gate=name, status=GateStatus.FAILED, counts_as_failure=True,
        limits={"budget_ms": budget}, details={**details, "error": row.error},
        message=f"{profile} {_shapes_text(row.shapes or {})}: cannot run at this "
                f"profile's shapes: {row.error}{hint}")


def _latency_from_stats(target: str, gate: LatencyGate, stats: LatencyFigures,
                        policy: Policy, samples: list[float] | None = None, *,
                        budget: float | None = None, name: str = "latency",
                        where: str = "") -> GateResult:
    """The verdict from a measure-latency stage's figures (`samples`: to keep some);
    `budget`: a shape profile's (default: the gate's one budget); `where`: the record's."""
    budget = gate.budget_for(EXAMPLE) if budget is None else budget
    assert budget is not None
    key = f"p{gate.percentile}"
    said = f" ({where})" if where else ""
    limits = {"budget_ms": budget, "percentile": gate.percentile}
    value, interval = stats.at(gate.percentile)
    if value is None:  # a device tool's own statistics (e.g. TFLite benchmark_model)
        return _device_latency(target, gate, stats, where, limits, policy)
    # a device tool gives no interval; a side is None where the samples cannot bound it
    low, high = interval or (value, value)
    ok = value <= budget
    note = ""
    if ok and (high is None or high > budget):
        from edgebuild.measure.stats import unbounded_note

        note = (" (its 95 % interval reaches past the budget: close to the limit)"
                if high is not None else f" ({unbounded_note(key, [low, high])})")
    per = " per step" if stats.per == "step" else ""  # a stream's: one step a run
    # A device tool's percentile (perf_analyzer's, say) comes without one: none is shown.
    ci = f" [95 % CI {_bound(low)}–{_bound(high)}]" if interval else ""
    message = (f"{key} {value:.3f} ms{per}{ci} over {stats.n} runs, budget {budget:g} ms"
               f"{note}{said}")
    status, fails = passed_if(ok), not ok
    details: dict[str, Any] = {}
    conditions = stats.conditions.as_dict() if stats.conditions is not None else {}
    # Timed while others took the CPU (measure.max_busy_share, after waiting for quiet),
    # or on a loaded machine with on_noisy: undecided: a miss may be the load's doing.
    busy = str(conditions.get("busy") or "")
    noisy = None
    if not ok:
        noisy = (machine_load(conditions) if busy else
                 too_noisy(conditions, gate.max_load)
                 if gate.on_noisy is OnNoisy.UNDECIDED else None)
    if noisy is not None:
        details["noisy"] = {**noisy.to_json(), "max_load": gate.max_load}
        lowest = value if low is None else min(value, float(low))
        if not noisy.explains(lowest, budget, gate.percentile, stats.min):
            # more than any plausible slowdown: a regression, whatever the load
            details["noisy"]["beyond_noise"] = True
            message = f"{message}; {beyond_noise(noisy, lowest, budget, stats.min)}"
        elif busy:
            status, fails = GateStatus.UNMEASURABLE, policy.unmeasurable is Unmeasurable.FAIL
            details["busy"] = True
            message = (f"{busy} ({message}; that load explains a slowdown of up to "
                       f"{noisy.slowdown:.1f}×) (policy.unmeasurable: "
                       f"{policy.unmeasurable.value})")
        else:
            status, fails = GateStatus.UNDECIDED, policy.undecided is Undecided.FAIL
            over = (f"{noisy.per_core:.2f} a core is over max_load {gate.max_load:g}; "
                    if noisy.per_core > gate.max_load else "")
            message = (f"undecided (machine too noisy: {noisy.sentence()} during "
                       f"measurement): {message}; {over}that load explains a slowdown of up "
                       f"to {noisy.slowdown:.1f}×, re-run on a quieter machine "
                       f"(policy.undecided: {policy.undecided.value})")
    elif ok and busy:
        message += (f"; met although other processes used "
                    f"{conditions.get('others_busy_share', 0):.0%} of the CPU (load only slows)")
    return GateResult(
        target=target, gate=name, status=status, counts_as_failure=fails,
        measured=stats.figures(("p50", "p90", "p99", "mean", "std", "n")),
        limits=limits,
        details={"ci95": [low, high], "conditions": conditions, "where": where, **details,
                 **({"per": "step"} if per else {}),
                 **({"samples_ms": samples} if samples else {})},
        message=message)


def _bound(value: float | None) -> str:
    return "?" if value is None else f"{value:.3f}"


def _device_latency(target: str, gate: LatencyGate, stats: LatencyFigures, where: str,
                    limits: dict[str, Any], policy: Policy) -> GateResult:
    """A measurement by a device's own tool that does not report the gated percentile.

    TFLite's benchmark_model prints mean/std/min/max (recent builds also a
    median), never p90/p99: such a gate cannot be decided from it, and saying
    so is better than gating on a different statistic.
    """
    measured = stats.figures(("p50", "mean", "std", "min", "max", "n"))
    said = f" ({where})" if where else ""
    message = (f"not measurable here: the device tool reports {', '.join(measured)} but not "
               f"p{gate.percentile}{said}; {stats.percentiles or ''}".rstrip("; "))
    return GateResult(
        target=target, gate="latency", status=GateStatus.UNMEASURABLE,
        counts_as_failure=policy.unmeasurable is Unmeasurable.FAIL, measured=measured,
        limits=limits, details={"where": where, "device": {**stats.to_json(), "where": where}},
        message=message)


def _kept_samples(artifact: Artifact, name: str, keep_samples: bool, memo: Path | None
                  ) -> list[float] | None:
    """The latency samples a report keeps (`subsample`), read back from the memo when
    this file was read before."""
    if not keep_samples or name not in artifact.files:
        return None
    return remembered(memo, "latency-samples", list[float],
                      lambda: subsample(artifact.path / name), {"samples": artifact.files[name]})
