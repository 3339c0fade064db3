"""ONNX Runtime's histogram calibration (entropy, percentile), one sample at a time.

ORT's `HistogramCollector` is written for one `collect()` of all the calibration data
(`quantize_static` without `CalibStridedMinMax`): the first call fixes each tensor's
histogram — `num_bins` bins over the range of the data it is given — and later calls
*add bins of that width* until the new values fit. edgebuild feeds one sample per call
(engines/ort.py: all samples at once held 22.6 GB for PP-PicoDet, and NMS outputs change
shape between images), so the bin width came from the first sample alone: a tensor
near 0 on the first image (a dark photo, a silent audio step) and larger later asked
for billions of bins — 36.3 GiB for a 2 MB model (`percentile`), "Too many bins for
data range" or minutes of KL search (`entropy`).

`streamed_histograms` replaces the collector while ORT calibrates: each tensor keeps
`num_bins` bins over the range seen so far; when a sample widens it, the old counts
move to the new, wider bins (each bin's count to the bin holding its centre). The
result is the histogram ORT builds from all the data at once — `num_bins` bins over
the whole range — within half a bin, in constant memory. Empty values (a detector's
NMS keeping no box on one image; ORT's `np.nanmax` raised on them) and non-finite ones
are left out; a tensor empty on every sample has no range, and the quantizer says so
(`engines/ort.py` turns that into a hint about the calibration images).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np


def _values(arrays: Any) -> np.ndarray | None:
    """One tensor's finite values over the arrays of one call, flat; None if none."""
    parts = [np.asarray(a).reshape(-1) for a in (arrays if isinstance(arrays, list)
                                                 else [arrays])]
    parts = [p[np.isfinite(p)] for p in parts if p.size]
    values = np.concatenate(parts) if parts else np.zeros(0)
    return values if values.size else None


def rebinned(hist: np.ndarray, low: float, high: float, new_low: float,
             new_high: float) -> np.ndarray:
    """Counts of `hist` (equal bins over [low, high]) moved to as many equal bins over
    the wider [new_low, new_high]: each bin's count to the new bin holding its centre."""
    bins = len(hist)
    if high <= low:  # a range of one value: all of it at that value
        centres = np.full(bins, low, dtype=np.float64)
    else:
        centres = low + (np.arange(bins) + 0.5) * (high - low) / bins
    width = (new_high - new_low) / bins
    index = np.clip(((centres - new_low) / width).astype(np.int64), 0, bins - 1)
    return np.bincount(index, weights=hist, minlength=bins).astype(hist.dtype)


def add(counts: np.ndarray | None, top: float, values: np.ndarray, bins: int,
        low: float) -> tuple[np.ndarray, float]:
    """`counts` (bins over [low * top, top]; None: nothing yet) plus `values`, over the
    range that holds both: (counts, its top). `low` is -1 for real values (a range
    symmetric about 0, as ORT's), 0 for absolute ones."""
    new_top = max(top, float(np.max(np.abs(values))))
    if counts is None:
        counts = np.zeros(bins, dtype=np.int64)
    elif new_top > top:
        counts = rebinned(counts, low * top, top, low * new_top, new_top)
    # All zeros so far: a range of one value; the counts sit in the bin holding 0.
    span = (low * new_top, new_top) if new_top > 0 else ((-0.5, 0.5) if low else (0.0, 1.0))
    added, _ = np.histogram(values.astype(np.float64), bins, range=span)
    return counts + added, new_top


@contextmanager
def streamed_histograms() -> Iterator[None]:
    """While active, ORT's histogram calibrators keep `num_bins` bins per tensor over
    the range seen so far (module docstring)."""
    from onnxruntime.quantization import calibrate

    original = calibrate.HistogramCollector

    class Streamed(original):  # type: ignore[misc, valid-type]
        """Entries keep ORT's layout, which compute_entropy / compute_percentile read:
        real values (hist, edges, min, max, threshold), edges over [-threshold,
        threshold]; absolute values (hist, edges, min, max), edges over [0, max |x|]."""

        def collect_value(self, name_to_arr: dict[str, Any]) -> None:
            self._collect(name_to_arr, low=-1.0)

        def collect_absolute_value(self, name_to_arr: dict[str, Any]) -> None:
            self._collect(name_to_arr, low=0.0)

        def _collect(self, name_to_arr: dict[str, Any], low: float) -> None:
            tops: dict[str, float] = self.__dict__.setdefault("_tops", {})
            for name, arrays in name_to_arr.items():
                values = _values(arrays)
                if values is None:
                    continue
                dtype = np.asarray(arrays[0] if isinstance(arrays, list) else arrays).dtype
                entry = self.histogram_dict.get(name)
                counts, top = add(None if entry is None else entry[0], tops.get(name, 0.0),
                                  np.abs(values) if low == 0.0 else values, self.num_bins,
                                  low)
                tops[name] = top
                lo, hi = float(values.min()), float(values.max())
                if entry is not None:
                    lo, hi = min(lo, float(entry[2])), max(hi, float(entry[3]))
                edges = np.linspace(low * top, top, self.num_bins + 1).astype(dtype)
                found = (counts, edges, np.array(lo, dtype=dtype), np.array(hi, dtype=dtype))
                self.histogram_dict[name] = found if low == 0.0 else \
                    (*found, np.array(top, dtype=dtype))

    calibrate.HistogramCollector = Streamed  # looked up by name in collect_data
    try:
        yield
    finally:
        calibrate.HistogramCollector = original
