"""Accuracy-aware INT8: keep the most sensitive layers in float until the drop is within
budget (`accuracy_aware:`), and the keep-float search the fidelity budget ends with.

    quantize all ─ passes? ─▶ done
        │ no
        ▼
    rank layers by the output error each causes alone (sensitivity.isolated_sensitivity)
    keep 1, 2, 4, … of the worst in float until one count passes,
    then bisect between the last count that failed and the first that passed

Every step is recorded in the stage's metadata. Imported only inside the worker.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from edgebuild.errors import StageError
from edgebuild.quant.prepare import quantize_prepared
from edgebuild.quant.prepared import Prepared
from edgebuild.quant.samples import feeds, first, first_steps, outputs

if TYPE_CHECKING:
    from edgebuild.data.loaders import Samples
    from edgebuild.quant.params import QuantizeParams


def drop(reference: np.ndarray, candidate: np.ndarray, labels: np.ndarray | None,
         metric: str) -> float:
    """Points lost by `candidate` against the FP32 `reference` on `metric`."""
    if metric == "top1":
        if labels is None:
            raise StageError("accuracy_aware.metric top1 needs a dataset with labels",
                             "use metric: top1_agreement, or a labelled dataset")
        ref = 100.0 * float(np.mean(reference.argmax(1) == labels))
        return ref - 100.0 * float(np.mean(candidate.argmax(1) == labels))
    return 100.0 - 100.0 * float(np.mean(candidate.argmax(1) == reference.argmax(1)))


def accuracy_aware(prepared: Prepared, destination: Path, p: QuantizeParams,
                   calibration: Samples | None, evaluation: Samples,
                   scratch: Path) -> dict[str, Any]:
    """Quantize, then keep the most sensitive layers in float until the drop is within
    `accuracy_aware.max_drop` (keep_float_search)."""
    assert p.accuracy_aware is not None
    budget = p.accuracy_aware
    reference = outputs(prepared.source, evaluation)

    def check(path: Path) -> Verdict:
        lost = drop(reference, outputs(path, evaluation), evaluation.labels, budget.metric)
        return Verdict(lost <= budget.max_drop, -lost, {"drop": round(lost, 4)})

    found = keep_float_search(prepared, destination, p, calibration, evaluation, scratch,
                              check, budget.max_iterations, budget.max_seconds)
    if not found.met:
        best_step = max(found.steps, key=lambda step: step["score"])
        raise StageError(
            f"accuracy-aware quantization could not reach a {budget.metric} drop of "
            f"{budget.max_drop:g} points: best {best_step['drop']:.2f} with "
            f"{best_step['kept_in_float']} layer(s) in float after {len(found.steps)} "
            f"step(s) ({found.seconds:.0f} s); most sensitive: {found.ranking[:5]}",
            "raise max_drop, max_iterations or max_seconds, try another calibration "
            "method, bias_correction, or quantize with mode fp16")
    return {**found.to_json(), "max_drop": budget.max_drop, "metric": budget.metric}


@dataclass
class Verdict:
    """One trial's outcome: passed, a score (higher is better) and what to record."""

    passed: bool
    score: float
    record: dict[str, Any] = field(default_factory=dict)


@dataclass
class KeptFloat:
    """What keep_float_search tried and found."""

    met: bool
    steps: list[dict[str, Any]]
    kept: list[str]
    scored: list[tuple[str, float]]
    seconds: float
    stopped: str = ""  # why a search that found nothing ended: iterations, seconds, layers

    @property
    def ranking(self) -> list[str]:
        return [node for node, _ in self.scored]

    def to_json(self) -> dict[str, Any]:
        return {"steps": [{k: v for k, v in step.items() if k != "score"}
                          for step in self.steps],
                "kept_in_float": self.kept,
                **({"stopped": self.stopped} if self.stopped else {}),
                "most_sensitive": [{"node": n, "output_error": round(e, 5)}
                                   for n, e in self.scored[:10]]}


def keep_float_search(prepared: Prepared, destination: Path, p: QuantizeParams,
                      calibration: Samples | None, evaluation: Samples, scratch: Path,
                      check: Callable[[Path], Verdict], max_iterations: int,
                      max_seconds: float) -> KeptFloat:
    """Quantize, then keep the most sensitive layers in float until `check` passes.

    Sensitivity of a layer = output error when that layer alone is quantized
    (isolated_sensitivity). Step k keeps the 2^(k-1) most sensitive layers in
    float (1, 2, 4, ...), so a budget that needs many float layers is found in
    a logarithmic number of re-quantizations; bisection between the last count
    that failed and the first that passed then finds the fewest, as far as the
    iteration and time bounds allow. The model written to `destination` is the
    passing one with the fewest float layers; when none passed, the best scored.
    """
    started = time.monotonic()
    trial, best, best_failed = scratch / "trial.onnx", scratch / "best.onnx", \
        scratch / "best-failed.onnx"
    steps: list[dict[str, Any]] = []
    ranking: list[str] = []

    def passes(count: int) -> bool:
        excluded = list(dict.fromkeys([*prepared.exclude, *ranking[:count]]))
        quantize_prepared(prepared, trial, p, calibration, excluded, scratch)
        verdict = check(trial)
        if verdict.passed:
            shutil.copyfile(trial, best)
        elif all(verdict.score > step["score"] for step in steps if not step["passed"]):
            shutil.copyfile(trial, best_failed)
        steps.append({"kept_in_float": len(excluded), **verdict.record,
                      "passed": verdict.passed, "score": verdict.score,
                      "seconds": round(time.monotonic() - started, 2)})
        return verdict.passed

    def exhausted() -> bool:
        return len(steps) >= max_iterations or time.monotonic() - started > max_seconds

    scored: list[tuple[str, float]] = []
    low, high = 0, 0
    if not passes(0):
        probe = (feeds(first(calibration, 8)) if calibration is not None
                 else first_steps(evaluation, 8))
        deadline = started + max_seconds / 2
        from edgebuild.quant.search.sensitivity import isolated_sensitivity

        scored = isolated_sensitivity(prepared, p, calibration, probe, scratch, deadline)
        ranking = [node for node, _ in scored if node not in prepared.exclude]
        count = 1
        while True:
            if exhausted() or low >= len(ranking):
                shutil.copyfile(best_failed, destination)
                stopped = ("layers" if low >= len(ranking) else
                           "iterations" if len(steps) >= max_iterations else "seconds")
                return KeptFloat(False, steps, [], scored, time.monotonic() - started,
                                 stopped)
            if passes(count):
                high = count
                break
            low, count = count, min(count * 2, len(ranking))
        while high - low > 1 and not exhausted():
            middle = (low + high) // 2
            if passes(middle):
                high = middle
            else:
                low = middle
    best.replace(destination)
    kept = list(dict.fromkeys([*prepared.exclude, *ranking[:high]]))
    return KeptFloat(True, steps, kept, scored, time.monotonic() - started)
