"""Percentile confidence intervals bracket the truth at least at the stated rate."""

from __future__ import annotations

import math

import numpy as np
import pytest

from edgebuild.measure.stats import (
    binomial_cdf,
    order_ranks,
    quantile_ci,
    summarize,
    unbounded_note,
)


def test_summary_fields() -> None:
    samples = np.linspace(1.0, 2.0, 201)
    s = summarize(samples)
    assert s["n"] == 201
    assert s["p50"] == 1.5
    low, high = s["p50_ci95"]
    assert low <= 1.5 <= high
    assert s["p99_ci95"][1] is None  # 201 samples cannot bound p99 from above


def test_binomial_cdf_is_exact() -> None:
    for n, q in ((1, 0.5), (7, 0.3), (50, 0.99), (200, 0.9)):
        exact = [sum(math.comb(n, i) * q**i * (1 - q) ** (n - i) for i in range(k + 1))
                 for k in range(n + 1)]
        assert np.allclose(binomial_cdf(n, q), exact, rtol=1e-12, atol=1e-14)


def test_ranks_are_the_textbook_ones_and_none_where_no_rank_bounds() -> None:
    assert order_ranks(50, 0.5) == (18, 33)  # the median's 95 % ranks at n = 50
    assert order_ranks(5, 0.5) == (None, None)  # 2 × 0.5⁵ > 5 %: nothing bounds it
    assert order_ranks(50, 0.99)[1] is None  # p99 at n = 50: no upper rank
    assert order_ranks(367, 0.99)[1] is None  # 0.99³⁶⁷ = 0.02503 > 2.5 %
    assert order_ranks(368, 0.99)[1] == 368  # the largest sample, from 368 on
    with pytest.raises(ValueError):
        order_ranks(0, 0.5)


def test_unbounded_side_is_said_in_words() -> None:
    assert unbounded_note("p99", [1.0, None]) == "not enough samples to bound p99 from above"
    assert unbounded_note("p50", [None, None]) == "not enough samples to bound p50"
    assert unbounded_note("p50", [1.0, 2.0]) == ""
    assert unbounded_note("p50", None) == ""


@pytest.mark.parametrize(("n", "q"), [(50, 0.5), (50, 0.9), (200, 0.5), (400, 0.99),
                                      (1000, 0.99)])
def test_coverage_by_simulation_on_a_skewed_distribution(n: int, q: float) -> None:
    """2000 draws of n lognormal samples (skewed like latencies): the interval holds the
    true quantile in at least 93 % of them (exact ranks: >= 95 % up to simulation noise).
    The normal approximation this replaced covered p99 at n = 50 about 36 % of the time."""
    rng = np.random.default_rng(1234)
    sigma = 0.6
    truth = float(np.exp(sigma * _normal_quantile(q)))
    draws = rng.lognormal(0.0, sigma, size=(2000, n))
    hits = 0
    for row in draws:
        low, high = quantile_ci(row, q)
        hits += (low is None or low <= truth) and (high is None or truth <= high)
    assert hits / 2000 >= 0.93


def test_p99_at_50_samples_is_one_sided_and_still_covers() -> None:
    rng = np.random.default_rng(7)
    truth = float(np.exp(0.6 * _normal_quantile(0.99)))
    lows = [quantile_ci(rng.lognormal(0.0, 0.6, 50), 0.99) for _ in range(2000)]
    assert all(high is None for _, high in lows)
    assert sum(low is not None and low <= truth for low, _ in lows) / 2000 >= 0.93


def _normal_quantile(q: float) -> float:
    """Φ⁻¹(q) by bisection on erf (no scipy needed)."""
    lo, hi = -10.0, 10.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if 0.5 * (1 + math.erf(mid / math.sqrt(2))) < q:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2
