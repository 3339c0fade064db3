"""The one table of accuracy limits: which metric each gate key bounds, from which side,
and the best value that metric can reach.

    min_cosine: 0.995  ──LIMITS──▶  Limit(metric="cosine", at_least=True, best=1.0)
                                     met(0.997, 0.995)       True
                                     headroom(0.9975, 0.995) 0.5    (half the allowed error left)
                                     missed(0.99, 0.995)     "cosine 0.99 < 0.995"

The gate's verdict (fidelity/verdict.py), the quantizer's budget (which ranks trials by
headroom) and a search's failure line all read it, so a new key of the gate's schema
(recipe/accuracy.py) is one entry here (tests/unit/test_limits.py checks that none is
missing).
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Limit:
    """One limit key of an accuracy gate: the metric it bounds, whether the metric must be
    at least (`min_*`) or at most (`max_*`) the limit, and the best the metric can be
    (`None`: unbounded, as PSNR; headroom then measures against twice the limit)."""

    metric: str
    at_least: bool
    best: float | None = None

    def met(self, value: float | None, limit: float) -> bool:
        """Whether a measured `value` meets `limit`; a value not measured (None) or NaN never
        does (no figure over a NaN means anything)."""
        if value is None or math.isnan(value):
            return False
        return value >= limit if self.at_least else value <= limit

    def headroom(self, value: float | None, limit: float) -> float:
        """(value - limit) / (best - limit): 1 is the best the metric can be, 0 is at the
        limit, -1 is twice the allowed error. It puts every limit on one scale whatever its
        units (cosine 0.990 against 0.995 is -1, agreement 95 % against 99 % is -4); -inf
        for a value not measured or NaN."""
        if value is None or math.isnan(value):
            return float("-inf")
        if self.at_least:
            best = self.best if self.best is not None else abs(limit) * 2 or 1.0
            return (value - limit) / max(best - limit, 1e-9)
        best = self.best if self.best is not None else 0.0
        return (limit - value) / max(limit - best, 1e-9)

    def missed(self, value: float, limit: float) -> str:
        """The figure against the limit it misses, as a gate's message says it."""
        return f"{self.metric} {value:.4g} {'<' if self.at_least else '>'} {limit:g}"


def _least(metric: str, best: float | None = 100.0) -> Limit:
    return Limit(metric, at_least=True, best=best)


def _most(metric: str) -> Limit:
    return Limit(metric, at_least=False, best=0.0)


# Gate key -> its limit, in the order a gate lists its limits and its failures. Percent
# metrics are best at 100, cosine at 1, errors and drops at 0; PSNR has no best.
LIMITS: dict[str, Limit] = {
    "min_top1": _least("top1"),
    "min_top5": _least("top5"),
    "max_top1_drop": _most("top1_drop"),
    "min_top1_agreement": _least("top1_agreement"),
    "min_decided_agreement": _least("decided_agreement"),
    "min_cosine": _least("cosine", 1.0),
    "max_abs_error": _most("max_abs_error"),
    "max_relative_error": _most("relative_error"),
    "min_psnr": _least("psnr", None),
    "min_box_agreement": _least("box_agreement"),
    "min_map50": _least("map50"),
    "min_score_agreement": _least("score_agreement"),
    "min_map50_labels": _least("map50_labels"),
    "max_map50_labels_drop": _most("map50_labels_drop"),
    "min_decision_agreement": _least("decision_agreement"),
    "min_region_recall": _least("region_recall"),
    "min_region_iou": _least("region_iou"),
    "min_sequence_match": _least("sequence_match"),
    "max_cer": _most("cer"),
    "min_sequence_match_labels": _least("sequence_match_labels"),
    "max_cer_labels": _most("cer_labels"),
}
