"""Latency regressions decided by a statistical test, robust to a noisy machine.

Measuring the baseline and the candidate in *separate* runs compares two
machine states as much as two models: on a shared machine the same model's
median moves by 20–30 % between runs. So `run --baseline` measures both
artifacts in one process, interleaved in blocks (A, B, A, B, …), and compares
them block by block:

    ratio_i = median(candidate block i) / median(baseline block i)
    estimate = median(ratio_i);  95 % CI from a bootstrap over blocks

Drift hits both members of a block alike and cancels in ratio_i; resampling
whole blocks keeps their within-block correlation out of the interval. The
verdict, for a threshold t:

    CI low  > 1 + t  -> regression (fails)
    CI high < 1 + t  -> no regression (passes)
    otherwise        -> undecided: the machine was too noisy to tell (warns)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from edgebuild.recipe.common import MeasureSettings

BLOCK = 10  # runs per block: short enough to share a machine state, long enough for a median
MIN_BLOCKS = 5  # fewer cannot support a confidence interval
SETTLE_S = 0.05


@dataclass(frozen=True)
class Verdict:
    ratio: float  # candidate / baseline, medians
    low: float
    high: float
    threshold: float  # as a fraction, 0.1 = 10 %
    blocks: int
    decision: str  # regression | ok | undecided

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
        if self.blocks < MIN_BLOCKS:
            return f"undecided: only {self.blocks} blocks of samples; measure longer"
        return (f"undecided, the machine was too noisy: {where} straddles the "
                f"{self.threshold:.0%} threshold; re-run on a quieter machine")

    def to_json(self) -> dict[str, Any]:
        return {"ratio": self.ratio, "ci95": [self.low, self.high], "threshold": self.threshold,
                "blocks": self.blocks, "decision": self.decision}


def measure_interleaved(run_baseline: Callable[[], Any], run_candidate: Callable[[], Any],
                        settings: MeasureSettings) -> tuple[np.ndarray, np.ndarray]:
    """Alternate blocks of timed runs until both get min_iterations and min_seconds pass.

    Returns two (blocks × BLOCK) arrays of milliseconds.
    """
    import time

    for _ in range(settings.warmup_iterations):
        run_baseline()
        run_candidate()
    base: list[list[float]] = []
    cand: list[list[float]] = []
    started = time.perf_counter()
    min_blocks = max(8, -(-settings.min_iterations // BLOCK))
    max_blocks = max(min_blocks, settings.max_iterations // BLOCK)
    while len(base) < max_blocks:
        for run, out in ((run_baseline, base), (run_candidate, cand)):
            # A runtime's worker threads keep spinning for tens of ms after a run; let
            # them settle so one model's idle threads do not slow the other's block.
            time.sleep(SETTLE_S)
            times = []
            for _ in range(BLOCK):
                t0 = time.perf_counter_ns()
                run()
                times.append((time.perf_counter_ns() - t0) / 1e6)
            out.append(times)
        if len(base) >= min_blocks and time.perf_counter() - started >= settings.min_seconds:
            break
    return np.asarray(base), np.asarray(cand)


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
    decision = "regression" if low > limit else "ok" if high < limit else "undecided"
    return Verdict(ratio, low, high, threshold, blocks, decision)


def _pseudo_blocks(samples: np.ndarray, count: int = 20) -> np.ndarray:
    """Consecutive runs grouped into `count` blocks (time order kept)."""
    size = max(1, len(samples) // count)
    usable = len(samples) // size * size
    return np.asarray(samples[:usable]).reshape(-1, size)
