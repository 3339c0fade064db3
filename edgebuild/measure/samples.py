"""Where measure-latency keeps a shape profile's timed samples, and how many of them a
report keeps (gate evaluation and `edgebuild compare` read them back)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path


def samples_file(profile: str) -> str:
    """The samples of one declared shape profile (names are folder-safe: SAFE_NAME)."""
    return f"samples_ms-{profile}.npy"


def subsample(path: Path, keep: int = 2000) -> list[float]:
    """At most `keep` samples in time order, so `edgebuild compare` can test two reports."""
    import numpy as np

    samples = np.load(path)
    if len(samples) > keep:
        samples = samples[np.linspace(0, len(samples) - 1, keep).astype(int)]
    return [round(float(v), 4) for v in samples]
