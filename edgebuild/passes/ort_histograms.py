"""A guard around ONNX Runtime's histogram calibration (entropy, percentile).

ORT 1.32's `HistogramCollector` merges a tensor's new values into its histogram with
`np.nanmax(values)`, which raises "zero-size array to reduction operation" when the
tensor is empty for one calibration sample: a detector whose NMS keeps no box on an
image. Its min/max calibrator has no such problem. The guard leaves empty values out
of the histograms; a tensor empty on every sample then has no range, and the quantizer
says so (`quantize_impl` turns that into a hint about the calibration images).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def empty_tensors_skipped() -> Iterator[None]:
    """While active, ORT's histogram calibrators ignore empty tensor values."""
    from onnxruntime.quantization import calibrate

    original = calibrate.HistogramCollector

    class SkipEmpty(original):  # type: ignore[misc, valid-type]
        def collect(self, name_to_arr: dict[str, list[Any]]) -> Any:
            # collect_data hands each tensor's values as a list, one array per sample.
            kept = {name: [a for a in arrays if a.size] for name, arrays in name_to_arr.items()}
            return super().collect({name: arrays for name, arrays in kept.items() if arrays})

    calibrate.HistogramCollector = SkipEmpty  # looked up by name in collect_data
    try:
        yield
    finally:
        calibrate.HistogramCollector = original
