"""The float model made ready once per stage, and every quantization made from it.

    source ─▶ prepare: cross-layer equalization (levers/equalize, if asked),
                       the nodes that stay float (safety), the score range
           ─▶ Prepared ─▶ quantize_prepared (any number of times: as written, a
                          budget's trials, one node alone for sensitivity):
                            reduce_range auto's overrides (levers/reduce_range)
                            + bias correction (levers/bias_correction)
                            ─▶ engine.quantize

Imported only inside the worker.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from edgebuild.quant.engine import quantize
from edgebuild.quant.levers.bias_correction import bias_corrected
from edgebuild.quant.levers.reduce_range import saturation_overrides
from edgebuild.quant.prepared import Prepared
from edgebuild.quant.samples import feeds, first, not_channel, observed_maxima, outputs

if TYPE_CHECKING:
    from edgebuild.data.loaders import Samples
    from edgebuild.quant.params import QuantizeParams


def prepare(source: Path, p: QuantizeParams, calibration: Samples | None,
            scratch: Path) -> Prepared:
    """Apply cross-layer equalization (if asked) and record what it did."""
    scratch.mkdir(parents=True, exist_ok=True)
    if p.equalize is None:
        return _with_float_nodes(Prepared(source, source), p, calibration)
    import onnx

    from edgebuild.quant.levers import equalize as eq

    model = onnx.load(str(source))
    upper: dict[str, np.ndarray] | None = None
    if p.equalize.clip == "exact":
        assert calibration is not None
        ranges = {name: (x.min(axis=not_channel(x)), x.max(axis=not_channel(x)))
                  for name, x in calibration.inputs.items()}
        upper = {k: hi for k, (_, hi) in eq.interval_bounds(model, ranges).items()}
    elif p.equalize.clip == "calibrated":
        assert calibration is not None
        upper = observed_maxima(source, [pair.tensor for pair in eq.find_pairs(model)],
                                calibration)
    result = eq.equalize(model, p.equalize.clip, p.equalize.max_iterations, upper)
    path = scratch / "equalized.onnx"
    onnx.save(model, str(path))
    summary = result.to_json()
    probe = calibration if calibration is not None else None
    if probe is not None:
        a, b = outputs(source, first(probe, 8)), outputs(path, first(probe, 8))
        summary["fp32_max_abs_diff"] = float(np.max(np.abs(a - b)))
        summary["fp32_top1_agreement"] = 100.0 * float(np.mean(a.argmax(1) == b.argmax(1)))
    return _with_float_nodes(Prepared(source, path, {"equalize": summary}), p, calibration)


RANGE_SAMPLES = 32


def _with_float_nodes(prepared: Prepared, p: QuantizeParams,
                      calibration: Samples | None) -> Prepared:
    """Decide which nodes stay float on every quantization of this stage (safety.py)."""
    if p.mode == "fp16":
        prepared.exclude = list(p.exclude_nodes)
        return prepared
    import onnx

    from edgebuild.quant.safety import float_nodes

    probe = None if calibration is None else feeds(first(calibration, RANGE_SAMPLES))
    chosen = float_nodes(onnx.load(str(prepared.path)), probe, p.keep_float.value,
                         p.mixed_range_bound, p.exclude_nodes, p.op_types)
    if p.preset == "tensorrt":
        chosen.notes.append("TensorRT runs the float nodes at the engine's float precision "
                            "(fp16 where the build allows it)")
    prepared.exclude = chosen.names
    prepared.metadata["kept_float"] = chosen.to_json()
    if calibration is not None:
        from edgebuild.quant.score_range import record

        # every calibration sample: one confident image is enough to calibrate the scores
        scores = record(onnx.load(str(prepared.source)), feeds(calibration))
        if scores is not None:
            prepared.metadata["score_range"] = scores
    return prepared



def quantize_prepared(prepared: Prepared, destination: Path, p: QuantizeParams,
                      calibration: Samples | None, exclude: list[str], scratch: Path,
                      only: list[str] | None = None) -> None:
    """`quantize` from the prepared float model, with reduce_range auto and bias correction."""
    overrides = saturation_overrides(prepared, p, calibration, scratch)
    source = prepared.path
    if p.bias_correction and calibration is not None:
        source = bias_corrected(prepared, p, calibration, exclude, scratch, only, overrides)
    quantize(source, destination, p, calibration, exclude, scratch, only, overrides)

