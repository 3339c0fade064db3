"""Percentile confidence intervals bracket the truth at about the stated rate."""

from __future__ import annotations

import numpy as np

from edgebuild.measure.stats import quantile_ci, summarize


def test_summary_fields() -> None:
    samples = np.linspace(1.0, 2.0, 201)
    s = summarize(samples)
    assert s["n"] == 201
    assert s["p50"] == 1.5
    low, high = s["p50_ci95"]
    assert low <= 1.5 <= high


def test_ci_coverage_is_close_to_95_percent() -> None:
    rng = np.random.default_rng(0)
    true_median = np.log(2)  # median of Exp(1): a skewed, latency-like distribution
    hits = 0
    for _ in range(400):
        low, high = quantile_ci(rng.exponential(size=200), 0.5)
        hits += low <= true_median <= high
    assert 0.92 <= hits / 400 <= 0.99
