"""The verdict of one accuracy gate from two stored outputs files (build and FP32).

A pure function of those files and the gate, so a test can hand it any pair of
outputs — a detector with its class scores zeroed, a NaN — without running a build:

    outputs files ──compare_gate──▶ Comparison ──refusal? limits (LIMITS)──▶ Judgement

The gate turns a Judgement into its GateResult (gates/result.py); the quantizer's
budget ranks its trials by `Judgement.headroom`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from edgebuild.fidelity.compare import compare_gate
from edgebuild.fidelity.judgement import Judgement
from edgebuild.fidelity.limits import LIMITS
from edgebuild.fidelity.metrics import Comparison
from edgebuild.fidelity.regions import RARE_POSITIVE
from edgebuild.recipe.accuracy import AccuracyGate

# The metrics a gate's one-line message names, by what the output holds.
SHOWN = {"classification": ("top1", "decided_agreement", "top1_agreement", "cosine",
                            "decision_agreement"),
         "regression": ("cosine", "relative_error", "max_abs_error", "decision_agreement",
                        "region_recall", "region_iou"),
         "dense": ("psnr", "relative_error", "max_abs_error", "decision_agreement",
                   "region_recall", "region_iou"),
         "ctc": ("sequence_match", "cer", "cosine", "cer_labels", "reference_cer_labels"),
         "detection": ("box_agreement", "map50", "score_agreement", "reference_boxes",
                       "map50_labels", "reference_map50_labels")}


def judge(gate: AccuracyGate, candidate: Path, reference: Path, where: str = "",
          counted: str = "samples", rows: int | None = None) -> Judgement:
    """Passed only when every limit the gate sets is measured and met; `counted`: what a
    compared row is (a stream's: steps); `rows`: how many calls the outputs came from,
    which an output with a sample axis has as many rows as."""
    of = (f" (output '{gate.output}{gate.part_label}')" if gate.output else
          f" (outputs {', '.join(gate.checked_outputs)})" if gate.boxes else "")
    details: dict[str, Any] = {"dataset": gate.dataset, "output": gate.output,
                               "task": gate.task.value, "where": where}
    if gate.slice is not None:
        details["slice"] = gate.slice.model_dump()
    try:
        found = compare_gate(candidate, reference, gate, rows)
    except ValueError as exc:  # labels or outputs that cannot be compared: say so, fail
        return Judgement(False, f"cannot compare on '{gate.dataset}'{of}: {exc}",
                         details=details)
    metrics = found.metrics
    details.update(found.details)
    limits = {key: float(getattr(gate, key)) for key in LIMITS
              if getattr(gate, key) is not None}
    n = int(metrics["samples"])
    # Figures from a stand-in (an emulator, a proxy) say so in the line people read.
    head = f"on {n} {counted} of '{gate.dataset}'{of}" + (f" [{where}]" if where else "")
    refusal = _refusal(found, gate)
    if refusal is not None:
        # "refused:": the gate as written cannot judge this output (a build's error is
        # not the cause, so no layer is blamed: gates/kinds/accuracy.py reads `refused`).
        details = {**details, "refused": refusal.startswith("refused:")}
        return Judgement(False, f"{head}: {refusal}", metrics, limits, details=details)
    failures = []
    for key, limit in limits.items():
        check = LIMITS[key]
        if check.metric not in metrics:
            failures.append(f"{check.metric} cannot be measured: "
                            f"{_unmeasured(check.metric, metrics, gate)}")
        elif not check.met(metrics[check.metric], limit):
            failures.append(check.missed(metrics[check.metric], limit))
    shown = ", ".join(f"{m} {metrics[m]:.4g}" for m in SHOWN[gate.task.value] if m in metrics)
    message = f"{head}: {shown}{_explained(metrics, details)}"
    if failures:
        message += f"; failed: {'; '.join(failures)}"
    return Judgement(not failures, message, metrics, limits, failures, details)


def _refusal(found: Comparison, gate: AccuracyGate) -> str | None:
    """Why no figure of this comparison can pass the gate: a NaN/Inf, or a whole-output
    metric blind to a part of the output."""
    bad = found.details.get("non_finite")
    if bad is not None:
        whose = "the build's output" if bad["in"] == "candidate" else "the FP32 reference"
        first = ", ".join(map(str, bad["first_samples"]))
        return (f"{whose} holds {bad['values']} non-finite value(s) ({bad['nan']} NaN, "
                f"{bad['inf']} Inf) on {bad['samples']} sample(s) (first: {first}); no "
                "figure over it means anything, so every limit fails")
    left = found.details.get("out_of_range")
    if left is not None:
        worst = ", ".join(f"{w['value']:.6g} (sample {w['sample']})" for w in left["worst"])
        return (f"the build's output leaves the range FP32's spans ({left['low']:.4g} .. "
                f"{left['high']:.4g}, ± {left['tolerance']:g} of it): {left['values']} "
                f"value(s) on {left['samples']} sample(s), the worst {worst}; an output "
                "outside what the model can produce (a sigmoid below 0) is a defect, so every "
                "limit fails (`range_tolerance:` widens the band, null turns it off)")
    rare = _rare_positives(found.metrics, gate)
    if rare is not None:
        return rare
    blind = found.details.get("blind")
    if blind is not None:
        seen = ", ".join(f"{k.removeprefix('min_').removeprefix('max_')} {v:.4g}"
                         for k, v in blind["zeroed_metrics"].items())
        axis, output = blind["axis"], gate.output or found.details.get("output_name", "")
        return (f"refused: this output mixes ranges along axis {axis} (channels "
                f"{blind['channels']} reach {blind['small_max']:.3g}, the others "
                f"{blind['large_max']:.3g}), and FP32 with those channels zeroed would still "
                f"pass ({seen}): the whole-output metric cannot see them. Gate each part on "
                f"its own, each with its own limits ({_part_gates(blind, output)}), or per "
                f"channel (`channel_axis: {axis}`); `channel_axis: whole` keeps the "
                "whole-output figure knowingly")
    return None


def _rare_positives(metrics: dict[str, float], gate: AccuracyGate) -> str | None:
    """Agreement that a constant build would reach is blind: deciding negative everywhere
    agrees on all but FP32's positives (a text map's 99.91 %), positive everywhere on its
    positives. Refused where positives are rare (under RARE_POSITIVE %), or where either
    constant build would meet the limit."""
    positive = metrics.get("reference_positive")
    limit = gate.min_decision_agreement
    if limit is None or positive is None:
        return None
    constant = max(positive, 100 - positive)
    if positive >= RARE_POSITIVE and constant < limit:
        return None
    nowhere = positive <= 50
    why = (f"under {RARE_POSITIVE:g} %" if positive < RARE_POSITIVE else
           f"min_decision_agreement {limit:g} passes it")
    return (f"refused: FP32 is above threshold {gate.threshold:g} on {positive:.3g} % of "
            f"{int(metrics['decisions']):,} values, so a build that is above it "
            f"{'nowhere' if nowhere else 'everywhere'} agrees on {constant:.4g} % ({why}): "
            "agreement cannot see the decisions that matter. Gate the positive region "
            "instead: replace `min_decision_agreement` by `min_region_recall: 95, "
            f"min_region_iou: 80` (keep `threshold: {gate.threshold:g}`; add "
            "`peak_threshold:` where a region counts only where it peaks, as EasyOCR keeps a "
            "CRAFT box only where the map reaches 0.7 inside 0.4; `task: dense`) "
            "(docs/gates.md#sparse-binary-maps)")


def _part_gates(blind: dict[str, Any], output: str) -> str:
    """`slice: {axis: 1, stop: 4}` and `slice: {axis: 1, start: 4}`, one gate each: the
    slices of the parts `blind` found, written as a recipe takes them."""
    axis = blind["axis"]
    slices = []
    for start, stop in blind.get("parts") or [(None, None)]:
        bounds = [f"start: {start}" if start is not None else "",
                  f"stop: {stop}" if stop is not None else ""]
        shown = ", ".join(b for b in bounds if b) or "start: …, stop: …"
        slices.append(f"`slice: {{axis: {axis}, {shown}}}`")
    said = ", ".join(slices[:-1]) + f" and {slices[-1]}" if len(slices) > 1 else slices[0]
    return f"{said}, one gate each" + (f", `output: {output}`" if output else "")


def _unmeasured(metric: str, metrics: dict[str, float], gate: AccuracyGate) -> str:
    if metric == "top5" and "top1" in metrics:
        return f"the output has {int(metrics['classes'])} classes, so top-5 is always 100 %"
    if metric == "decided_agreement":
        return (f"no sample has an FP32 top-1 − top-2 gap of at least margin {gate.margin:g} "
                "(nothing decided to agree on)")
    if metric in ("region_recall", "region_iou"):
        peak = (f" reaching {gate.peak_threshold:g}" if gate.peak_threshold is not None
                else "")
        return (f"FP32 has no region above threshold {gate.threshold:g}{peak} on "
                f"'{gate.dataset}' (nothing to find); its largest value is "
                f"{metrics.get('reference_peak', float('nan')):.4g}")
    if gate.class_axis is not None and metric in ("top1", "top5", "top1_drop"):
        return (f"dataset '{gate.dataset}' has no labels per position (one label a sample "
                "cannot be compared per position)")
    return f"dataset '{gate.dataset}' has no labels"


def _explained(metrics: dict[str, float], details: dict[str, Any]) -> str:
    """The context a figure needs: how many were decided, which channel is worst."""
    parts = []
    if "positions" in metrics:
        parts.append(f"per position: {int(metrics['positions'])} a sample")
    if "decisions" in metrics:
        parts.append(f"FP32 positive on {metrics['reference_positive']:.3g} % of "
                     f"{int(metrics['decisions'])} decisions")
    if "regions" in metrics:
        parts.append(f"{int(metrics['regions_found'])} of {int(metrics['regions'])} FP32 "
                     f"region(s) found, {int(metrics['extra_regions'])} extra; the build's map "
                     f"peaks at {metrics['peak']:.3g}, FP32's at {metrics['reference_peak']:.3g}")
    if "decided_samples" in metrics:
        total = int(metrics["samples"] * metrics.get("positions", 1))
        parts.append(f"{int(metrics['decided_samples'])} of {total} "
                     f"decided at margin {metrics['margin']:g}")
    flips = details.get("flips") or []
    if flips:
        shown = ", ".join(f"{f['fp32_margin']:.3g}" for f in flips[:5])
        more = f" (+{int(metrics['flips']) - 5} more)" if metrics.get("flips", 0) > 5 else ""
        parts.append(f"{int(metrics['flips'])} flip(s) at FP32 margin {shown}{more}")
    worst = details.get("worst_channel", {}).get("cosine")
    if worst is not None:
        parts.append(f"worst channel {worst['channel']} of axis {details['channel_axis']}; "
                     f"whole-output cosine {metrics['whole_cosine']:.4g}")
    return f" ({'; '.join(parts)})" if parts else ""
