"""The accuracy gates: the build's outputs against FP32's, one gate per output and dataset.

    reference stage (FP32 outputs) ─┐
                                    ├─▶ judge (fidelity/verdict.py, memoized) ─▶ accuracy[…]
    infer stage (the build's)     ──┘      + the quantize stage's layer and score-range notes
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from edgebuild.cache.memo import remembered
from edgebuild.fidelity.judgement import Judgement
from edgebuild.gates.kind import (
    GateKind,
    TargetRecords,
    blocked_by,
)
from edgebuild.gates.result import GateResult, GateStatus
from edgebuild.recipe.models import AccuracyGate, Gates, Policy


class AccuracyKind(GateKind):
    key = "accuracy"

    def evaluate(self, target: str, gates: Gates, records: TargetRecords, policy: Policy,
                 keep_samples: bool, memo: Path | None) -> list[GateResult]:
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
            results.append(_accuracy(target, name, gate, records, policy, memo))
        return results

    def failure(self, result: GateResult) -> str:
        """The limits a failed gate missed, each with its figure."""
        if result.status is GateStatus.FAILED:
            from edgebuild.fidelity.limits import LIMITS

            found = []
            for key, limit in result.limits.items():
                check = LIMITS[key]
                value = result.measured.get(check.metric)
                if value is None:
                    found.append(f"{check.metric} not measurable")
                elif not check.met(value, limit):
                    found.append(check.missed(value, limit))
            return "; ".join(found) or result.message
        return result.message


def _accuracy(target: str, name: str, gate: AccuracyGate, records: TargetRecords,
              policy: Policy, memo_root: Path | None = None) -> GateResult:
    infer = records.run(records.infers.get(gate.dataset))
    reference = records.run(records.references.get(gate.dataset))
    for run in (reference, infer):
        blocked = blocked_by(target, name, run, policy)
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
    layers = _layer_reports(records)
    clipped = _clipped_scores(gate, records)
    if clipped and result.counts_as_failure:
        # The cause is the calibration data, not a layer: a late node's error is its effect.
        result.details["calibration"] = clipped
        result.message += "; " + clipped[0]
    if layers and "cannot compare" not in result.message:
        result.details["layers"] = layers
        if result.counts_as_failure and not clipped and not result.details.get("refused"):
            result.message += "; " + _explain(layers)
    return result


def _clipped_scores(gate: AccuracyGate, records: TargetRecords) -> list[str]:
    """What the target's quantize stage recorded against the gate's or the decode's
    threshold (gates/thresholds.py): the sentences, first the stage's."""
    from edgebuild.core.thresholds import gate_sentences

    said: list[str] = []
    for stage_id in records.chain:
        run = records.run(stage_id)
        record = run.artifact.metadata.get("score_range") if run and run.artifact else None
        if isinstance(record, dict):
            said += [f"{stage_id}: {s}" for s in gate_sentences(record, gate)]
    return said


def _layer_reports(records: TargetRecords) -> dict[str, Any]:
    """Per-layer comparisons recorded by the target's passes (quantize's `layers`:
    quant/layer_compare.py), by stage."""
    found = {}
    for stage_id in records.chain:
        run = records.run(stage_id)
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
