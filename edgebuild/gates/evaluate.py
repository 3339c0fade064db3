"""Evaluate a target's gates from the artifacts its stages produced.

Pure functions of cached data: a fully cached run re-evaluates every gate in
milliseconds, and a changed limit never forces a re-measurement.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgebuild.cache.memo import remembered
from edgebuild.core.shapes import EXAMPLE
from edgebuild.execute.result import ExecutionResult, Outcome, StageRun
from edgebuild.fidelity.judgement import Judgement
from edgebuild.gates.noisy import beyond_noise, machine_load, too_noisy
from edgebuild.gates.result import GateResult, GateStatus
from edgebuild.measure.record import (
    ComparisonRecord,
    Conditions,
    LatencyFigures,
    LatencyRecord,
    PairFigures,
    RecordError,
    Throughput,
    read_record,
)
from edgebuild.measure.samples import samples_file, subsample
from edgebuild.plan.planner import TargetStages
from edgebuild.recipe.models import (
    AccuracyGate,
    Gates,
    LatencyGate,
    MemoryGate,
    OnNoisy,
    Policy,
    SpeedupGate,
    Undecided,
    Unmeasurable,
)

if TYPE_CHECKING:
    from edgebuild.core.artifact import Artifact


def evaluate_target(target: str, gates: Gates, stages: TargetStages,
                    execution: ExecutionResult, policy: Policy,
                    keep_samples: bool = True, memo: Path | None = None
                    ) -> list[GateResult]:
    """Every gate of one target (or search candidate); `keep_samples`: latency samples
    go into the latency gate's details (for `edgebuild compare`); `memo`: the cache folder
    whose memo (cache/memo.py) keeps what was read from stored files in earlier runs — an
    accuracy judgement, a latency gate's subsampled samples — by their content."""
    results = []
    named = len(gates.accuracy_gates) > 1
    several = len(gates.accuracy_datasets) > 1
    labels = []
    for gate in gates.accuracy_gates:
        # accuracy, accuracy[<output>], or with several datasets accuracy[<dataset>:<output>]
        output = (gate.output or gate.boxes or "") + gate.part_label
        labels.append(":".join(p for p in (gate.dataset if several else None, output) if p)
                      or gate.dataset)
    for gate, label in zip(gates.accuracy_gates, labels, strict=True):
        if labels.count(label) > 1:  # one output read as two tasks: accuracy[out:ctc]
            label = f"{label}:{gate.task.value}"
        name = f"accuracy[{label}]" if named else "accuracy"
        results.append(_accuracy(target, name, gate, stages, execution, policy, memo))
    if gates.latency is not None:
        results.extend(_latency(target, gates.latency, stages, execution, policy,
                                keep_samples, memo))
        if stages.compare is not None:
            results.extend(_regression(target, gates.latency, stages, execution, policy))
    if gates.speedup is not None:
        results.extend(_speedup(target, gates.speedup, stages, execution, policy))
    if gates.throughput is not None:
        results.append(_throughput(target, gates, stages, execution, policy))
    if gates.size is not None:
        compiled = execution.runs.get(stages.compiled)
        if compiled is None or compiled.artifact is None:
            results.append(_not_run(target, "size", compiled))
        else:
            size_mb = compiled.artifact.shipped_bytes / 1e6
            ok = size_mb <= gates.size.max_mb
            results.append(GateResult(
                target=target, gate="size", status=_status(ok), counts_as_failure=not ok,
                measured={"mb": round(size_mb, 3)}, limits={"max_mb": gates.size.max_mb},
                message=f"artifact is {size_mb:.2f} MB "
                        f"({'within' if ok else 'over'} the {gates.size.max_mb:g} MB limit)"))
    if gates.memory is not None:
        results.append(_memory(target, gates.memory, stages, execution, policy))
    return results


def _throughput(target: str, gates: Gates, stages: TargetStages, execution: ExecutionResult,
                policy: Policy) -> GateResult:
    from edgebuild.gates.throughput import judge_throughput

    assert gates.throughput is not None
    run = execution.runs.get(stages.throughput or "")
    blocked = _blocked(target, "throughput", run, policy)
    if blocked is not None:
        return blocked
    assert run and run.artifact
    try:
        record = read_record(Throughput, run.artifact.metadata, run.stage.id)
    except RecordError as exc:
        return _unreadable(target, "throughput", exc)
    return judge_throughput(target, gates.throughput, record, policy)


def _memory(target: str, gate: MemoryGate, stages: TargetStages, execution: ExecutionResult,
            policy: Policy) -> GateResult:
    """Judged like the size gate, from the peak memory measure-latency recorded; a backend
    or host that cannot measure it is unmeasurable (the policy decides), never a pass."""
    run = execution.runs.get(stages.latency or "")
    blocked = _blocked(target, "memory", run, policy)
    if blocked is not None:
        return blocked
    assert run and run.artifact
    try:
        memory = read_record(LatencyRecord, run.artifact.metadata, run.stage.id).memory
    except RecordError as exc:
        return _unreadable(target, "memory", exc)
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
        target=target, gate="memory", status=_status(ok), counts_as_failure=not ok,
        measured={"peak_mb": memory.peak_mb}, limits=limits,
        details={"memory": memory.to_json()},
        message=f"runtime peak {memory.peak_mb:.1f} MB for load + inference "
                f"({'within' if ok else 'over'} the {gate.max_mb:g} MB limit)"
                + (f"; with the Python process around it {memory.process_peak_mb:.0f} MB"
                   if memory.process_peak_mb is not None else ""))


def _status(ok: bool) -> GateStatus:
    return GateStatus.PASSED if ok else GateStatus.FAILED


def _not_run(target: str, gate: str, run: StageRun | None) -> GateResult:
    why = f"stage '{run.stage.id}' {run.outcome.value}" if run else "its stage did not run"
    return GateResult(target=target, gate=gate, status=GateStatus.NOT_RUN,
                      counts_as_failure=True, message=f"nothing measured: {why}")


def _blocked(target: str, gate: str, run: StageRun | None, policy: Policy) -> GateResult | None:
    """A result when the measuring stage produced nothing, else None."""
    if run is not None and run.outcome is Outcome.UNMEASURABLE:
        fails = policy.unmeasurable is Unmeasurable.FAIL
        return GateResult(
            target=target, gate=gate, status=GateStatus.UNMEASURABLE, counts_as_failure=fails,
            message=f"{run.message} (policy.unmeasurable: {policy.unmeasurable.value})")
    if run is None or run.artifact is None:
        return _not_run(target, gate, run)
    return None


def _accuracy(target: str, name: str, gate: AccuracyGate, stages: TargetStages,
              execution: ExecutionResult, policy: Policy,
              memo_root: Path | None = None) -> GateResult:
    infer = execution.runs.get(stages.infers.get(gate.dataset, ""))
    reference = execution.runs.get(stages.references.get(gate.dataset, ""))
    for run in (reference, infer):
        blocked = _blocked(target, name, run, policy)
        if blocked is not None:
            return blocked
    assert infer and infer.artifact and reference and reference.artifact
    where = str(infer.artifact.metadata.get("where") or "")
    meta = infer.artifact.metadata
    counted = ("samples" if "steps" not in meta else  # a stream: each build's own state
               f"steps ({meta['sequences']} sequence{'s' * (meta['sequences'] != 1)}, "
               "each build carrying its own state)")
    rows = meta.get("samples")
    candidate, fp32 = infer.artifact.main, reference.artifact.main

    def judged() -> Judgement:
        from edgebuild.fidelity.verdict import judge

        return judge(gate, candidate, fp32, where, counted, rows)

    # A pure function of the two outputs files (by content), the gate and the code: a
    # cached run reads it back instead of comparing again, and imports no numpy.
    judgement = remembered(memo_root, "judgements", Judgement, judged, {
        "build": infer.artifact.files, "fp32": reference.artifact.files, "where": where,
        "gate": gate.model_dump(mode="json"), "counted": counted, "rows": rows})
    result = GateResult.judged(target, name, judgement)
    layers = _layer_reports(stages, execution)
    clipped = _clipped_scores(gate, stages, execution)
    if clipped and result.counts_as_failure:
        # The cause is the calibration data, not a layer: a late node's error is its effect.
        result.details["calibration"] = clipped
        result.message += "; " + clipped[0]
    if layers and "cannot compare" not in result.message:
        result.details["layers"] = layers
        if result.counts_as_failure and not clipped and not result.details.get("refused"):
            result.message += "; " + _explain(layers)
    return result


def _clipped_scores(gate: AccuracyGate, stages: TargetStages,
                    execution: ExecutionResult) -> list[str]:
    """What the target's quantize stage recorded against the gate's or the decode's
    threshold (gates/thresholds.py): the sentences, first the stage's."""
    from edgebuild.core.thresholds import gate_sentences

    said: list[str] = []
    for stage_id in stages.chain:
        run = execution.runs.get(stage_id)
        record = run.artifact.metadata.get("score_range") if run and run.artifact else None
        if isinstance(record, dict):
            said += [f"{stage_id}: {s}" for s in gate_sentences(record, gate)]
    return said


def _layer_reports(stages: TargetStages, execution: ExecutionResult) -> dict[str, Any]:
    """Per-layer comparisons recorded by the target's passes (quantize's `layers`:
    quant/layer_compare.py), by stage."""
    found = {}
    for stage_id in stages.chain:
        run = execution.runs.get(stage_id)
        report = run.artifact.metadata.get("layers") if run and run.artifact else None
        if isinstance(report, dict):
            found[stage_id] = report
    return found


def _explain(layers: dict[str, Any]) -> str:
    """Where the optimized model leaves FP32: the sentence a failing gate adds."""
    parts = []
    for stage_id, report in layers.items():
        first = report.get("first_divergence")
        worst = ", ".join(f"{w['node']} (+{w['added']:.3f})" for w in report.get("worst", [])[:3])
        where = (f"first diverges at {first['node']} (relative error {first['error']:.3f})"
                 if first else "no single layer passes 5 % error")
        bad = report.get("non_finite", [])
        if bad:
            where += (f"; {len(bad)} layer(s) non-finite (NaN/inf), first {bad[0]['node']} "
                      f"in {bad[0]['non_finite']}")
        parts.append(f"{stage_id} {where}; layers adding most error: {worst} "
                     f"(exclude_nodes or accuracy_aware can keep them in float)")
    return "; ".join(parts)


def _latency(target: str, gate: LatencyGate, stages: TargetStages,
             execution: ExecutionResult, policy: Policy, keep_samples: bool = True,
             memo: Path | None = None) -> list[GateResult]:
    """One result, `latency`; with shape profiles one per profile, `latency[<profile>]`."""
    run = execution.runs.get(stages.latency or "")
    blocked = _blocked(target, "latency", run, policy)
    if blocked is not None:
        return [blocked]
    assert run and run.artifact
    try:
        record = read_record(LatencyRecord, run.artifact.metadata, run.stage.id)
    except RecordError as exc:
        return [_unreadable(target, "latency", exc)]
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


def _unreadable(target: str, gate: str, exc: RecordError) -> GateResult:
    """A gate whose measurement record cannot be read: it fails, saying why."""
    return GateResult(target=target, gate=gate, status=GateStatus.FAILED,
                      counts_as_failure=True, details={"hint": exc.hint},
                      message=f"cannot read the measurement: {exc.message}")


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
    message = (f"{key} {value:.3f} ms{per} [95 % CI {_bound(low)}–{_bound(high)}] over "
               f"{stats.n} runs, budget {budget:g} ms{note}{said}")
    status, fails = _status(ok), not ok
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


def _regression(target: str, gate: LatencyGate, stages: TargetStages,
                execution: ExecutionResult, policy: Policy) -> list[GateResult]:
    """One result, `regression`; with shape profiles one per profile."""
    return _paired(target, "regression", stages.compare, execution, policy,
                   lambda name, folder, suffix, stats, conditions: _compared(
                       target, name, gate, folder, suffix, stats, conditions, policy))


Judge = Callable[[str, Path, str, PairFigures, Conditions | None], GateResult]


def _paired(target: str, gate: str, stage: str | None, execution: ExecutionResult,
            policy: Policy, judge: Judge) -> list[GateResult]:
    """The gates of an interleaved A/B stage (compare-latency, compare-speed): one, or
    with shape profiles `gate[<profile>]` each; `judge(name, folder, suffix, stats,
    conditions)` decides one from the paired samples `*_ms<suffix>.npy` in `folder`."""
    run = execution.runs.get(stage or "")
    blocked = _blocked(target, gate, run, policy)
    if blocked is not None:
        return [blocked]
    assert run and run.artifact
    try:
        record = read_record(ComparisonRecord, run.artifact.metadata, run.stage.id)
        if record.profiles is None:
            record.paired()  # a single pair has its figures
    except RecordError as exc:
        return [_unreadable(target, gate, exc)]
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
            results.append(_unreadable(target, name, exc))
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


def _speedup(target: str, gate: SpeedupGate, stages: TargetStages,
             execution: ExecutionResult, policy: Policy) -> list[GateResult]:
    """`speedup` (with shape profiles `speedup[<profile>]`): this build against target
    `gate.over`'s, timed interleaved by compare-speed."""
    return _paired(target, "speedup", stages.speedup, execution, policy,
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
