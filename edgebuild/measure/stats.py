"""Latency statistics: percentiles and distribution-free confidence intervals.

A percentile's confidence interval comes from order statistics, exactly: the
number B of samples below the true q-quantile is Binomial(n, q), so the k-th
smallest sample X_(k) lies below it exactly when B >= k, and

    P(X_(l) <= true quantile <= X_(u)) >= P(l <= B < u) = F(u - 1) - F(l - 1)

with F the Binomial(n, q) CDF. The lower rank l is the largest with
F(l - 1) <= 2.5 %, the upper rank u the smallest with 1 - F(u - 1) <= 2.5 %; the
interval covers the true percentile at least 95 % of the time whatever the
(continuous) distribution — latencies are skewed and often bimodal. No normal
approximation: for p99 at n = 50 that one covered about a third of the time.

When no rank is far enough out (p99 needs 368 samples before the largest one
bounds it from above at 97.5 %), that side is None: "not enough samples to
bound p99". Renderers show it as such, never as a number.
"""

from __future__ import annotations

from typing import Any

import numpy as np

TAIL = 0.025  # each side of a 95 % interval


def binomial_cdf(n: int, q: float) -> np.ndarray:
    """F(k) = P(Binomial(n, q) <= k) for k = 0..n, computed in log space (exact to
    floating point; no scipy on the CLI's path)."""
    k = np.arange(n + 1)
    log_fact = np.concatenate(([0.0], np.cumsum(np.log(np.arange(1, n + 1)))))
    with np.errstate(divide="ignore"):
        log_pmf = (log_fact[n] - log_fact[k] - log_fact[n - k]
                   + k * np.log(q) + (n - k) * np.log1p(-q))
    top = log_pmf.max()
    pmf = np.exp(log_pmf - top)
    cdf: np.ndarray = np.cumsum(pmf) / pmf.sum()
    return cdf


def order_ranks(n: int, q: float, tail: float = TAIL) -> tuple[int | None, int | None]:
    """The 1-based ranks (l, u) of the order statistics bracketing the q-quantile with
    at least 1 - 2·tail confidence; None for a side no rank can bound at n samples."""
    if n < 1 or not 0 < q < 1:
        raise ValueError(f"need n >= 1 and 0 < q < 1, got n={n}, q={q}")
    cdf = binomial_cdf(n, q)  # cdf[k] = P(B <= k)
    # lower: the largest l >= 1 with P(B <= l - 1) <= tail
    lows = np.nonzero(cdf[:n] <= tail)[0]
    low = int(lows[-1]) + 1 if len(lows) else None
    # upper: the smallest u <= n with P(B >= u) = 1 - P(B <= u - 1) <= tail
    highs = np.nonzero(1.0 - cdf[:n] <= tail)[0]
    high = int(highs[0]) + 1 if len(highs) else None
    return low, high


def quantile_ci(samples: np.ndarray, q: float,
                tail: float = TAIL) -> tuple[float | None, float | None]:
    """A distribution-free interval for the q-quantile; a side is None when there are
    not enough samples to bound it (module docstring)."""
    ordered = np.sort(np.asarray(samples, dtype=float))
    low, high = order_ranks(len(ordered), q, tail)
    return (None if low is None else float(ordered[low - 1]),
            None if high is None else float(ordered[high - 1]))


def unbounded_note(key: str, ci: Any) -> str:
    """'' or what a one-sided interval means, for a message: 'not enough samples to
    bound p99' (from above; `from below` for the rare other side)."""
    if not isinstance(ci, list | tuple) or len(ci) != 2:
        return ""
    sides = [side for side, value in zip(("from below", "from above"), ci, strict=True)
             if value is None]
    if not sides:
        return ""
    return f"not enough samples to bound {key}" + ("" if len(sides) == 2
                                                    else f" {sides[0]}")


def summarize(samples_ms: np.ndarray) -> dict[str, Any]:
    """p50/p90/p99, mean, std and a 95 % interval for each percentile, in ms (a side
    of an interval is None where the samples cannot bound it)."""
    if len(samples_ms) == 0:
        raise ValueError("no latency samples")
    out: dict[str, Any] = {
        "n": len(samples_ms),
        "mean": float(np.mean(samples_ms)),
        "std": float(np.std(samples_ms, ddof=1)) if len(samples_ms) > 1 else 0.0,
        "min": float(np.min(samples_ms)),
        "max": float(np.max(samples_ms)),
    }
    for p in (50, 90, 99):
        out[f"p{p}"] = float(np.percentile(samples_ms, p))
        out[f"p{p}_ci95"] = list(quantile_ci(samples_ms, p / 100))
    return out
