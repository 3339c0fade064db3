"""Latency regressions decided by a statistical test, robust to a noisy machine.

Measuring the baseline and the candidate in *separate* runs compares two
machine states as much as two models: on a shared machine the same model's
median moves by 20–30 % between runs. So `run --baseline` measures both
artifacts in one process, interleaved in blocks (edgebuild/measure/timing.py),
and compares them block by block:

    ratio_i = median(candidate block i) / median(baseline block i)
    estimate = median(ratio_i);  95 % CI from a bootstrap over blocks

Drift hits both members of a block alike and cancels in ratio_i; resampling
whole blocks keeps their within-block correlation out of the interval. The
verdict, for a threshold t:

    CI low  > 1 + t  -> regression (fails)
    CI high < 1 + t  -> no regression (passes)
    otherwise        -> undecided: the machine was too noisy to tell (warns)

A slowdown (a threshold t >= 0) also has to exceed RESOLUTION_MS in absolute terms.
Two runtime sessions of the *same* model differ persistently by up to ±30 % when a run takes tens of
microseconds (which core each session's threads landed on; measured on a 2-core EPYC VM:
ratios 0.68–1.24 over six paired measurements of a 0.02 ms model), and interleaving
cannot cancel a difference that lasts the whole measurement. Below that floor the gate
is undecided and says why: it never fails a build on it, and never passes one either.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

MIN_BLOCKS = 5  # fewer cannot support a confidence interval
RESOLUTION_MS = 0.05  # smaller slow-downs are below what two sessions resolve (above)


@dataclass(frozen=True)
class Verdict:
    ratio: float  # candidate / baseline, medians
    low: float
    high: float
    threshold: float  # as a fraction, 0.1 = 10 %
    blocks: int
    decision: str  # regression | ok | undecided
    slower_ms: float = float("nan")  # candidate's median minus the baseline's

    @property
    def regressed(self) -> bool:
        return self.decision == "regression"

    def sentence(self) -> str:
        change = (self.ratio - 1) * 100
        where = f"{change:+.1f} % [95 % CI {(self.low - 1) * 100:+.1f} to " \
                f"{(self.high - 1) * 100:+.1f} %] over {self.blocks} blocks"
        if self.decision == "regression":
            return f"slower than the baseline by {where}, past the {self.threshold:.0%} threshold"
        if self.decision == "ok":
            return f"no regression: {where}, within the {self.threshold:.0%} threshold"
        if self.low > 1 + self.threshold >= 1:  # slower by a ratio, but by too little time
            return (f"undecided: {where}, but only {self.slower_ms * 1000:+.0f} µs per run, "
                    f"below the {RESOLUTION_MS * 1000:.0f} µs two runtime sessions of one "
                    "model differ by on a CPU; time it on the device or with a larger input")
        if self.blocks < MIN_BLOCKS:
            return f"undecided: only {self.blocks} blocks of samples; measure longer"
        return (f"undecided, the machine was too noisy: {where} straddles the "
                f"{self.threshold:.0%} threshold; re-run on a quieter machine")

    def to_json(self) -> dict[str, Any]:
        return {"ratio": self.ratio, "ci95": [self.low, self.high], "threshold": self.threshold,
                "blocks": self.blocks, "decision": self.decision,
                "slower_ms": self.slower_ms}


def decide(baseline: np.ndarray, candidate: np.ndarray, threshold: float,
           resamples: int = 2000, seed: int = 0) -> Verdict:
    """Compare paired blocks (rows) of baseline and candidate latencies."""
    if baseline.ndim == 1:  # unpaired samples (separate runs): one block each way
        baseline, candidate = _pseudo_blocks(baseline), _pseudo_blocks(candidate)
    blocks = min(len(baseline), len(candidate))
    if blocks < MIN_BLOCKS:
        return Verdict(float("nan"), float("nan"), float("nan"), threshold, blocks, "undecided")
    ratios = np.median(candidate[:blocks], axis=1) / np.median(baseline[:blocks], axis=1)
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, blocks, size=(resamples, blocks))
    boot = np.median(ratios[picks], axis=1)
    low, high = (float(v) for v in np.percentile(boot, [2.5, 97.5]))
    ratio = float(np.median(ratios))
    limit = 1 + threshold
    slower = float(np.median(candidate[:blocks]) - np.median(baseline[:blocks]))
    # The floor is for a slowdown (threshold >= 0: regression, select). A speed-up gate
    # (threshold < 0: "at least 1/(1+t)× as fast") fails a build that is not faster
    # enough, however few microseconds that is.
    beyond_floor = threshold < 0 or slower >= RESOLUTION_MS
    decision = ("regression" if low > limit and beyond_floor
                else "ok" if high < limit else "undecided")
    return Verdict(ratio, low, high, threshold, blocks, decision, slower)


def _pseudo_blocks(samples: np.ndarray, count: int = 20) -> np.ndarray:
    """Consecutive runs grouped into `count` blocks (time order kept)."""
    size = max(1, len(samples) // count)
    usable = len(samples) // size * size
    return np.asarray(samples[:usable]).reshape(-1, size)
