"""Latency statistics: percentiles and distribution-free confidence intervals.

A percentile's confidence interval comes from order statistics: the number of
samples below the true q-quantile is Binomial(n, q), so the ranks
n·q ± z·sqrt(n·q·(1−q)) bracket it. No normality assumption about latencies,
which are skewed and often bimodal.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np


def quantile_ci(samples: np.ndarray, q: float, z: float = 1.96) -> tuple[float, float]:
    ordered = np.sort(samples)
    n = len(ordered)
    spread = z * math.sqrt(n * q * (1 - q))
    low = max(0, math.floor(n * q - spread) - 1)
    high = min(n - 1, math.ceil(n * q + spread))
    return float(ordered[low]), float(ordered[high])


def summarize(samples_ms: np.ndarray) -> dict[str, Any]:
    """p50/p90/p99, mean, std and a 95 % interval for each percentile, in ms."""
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
