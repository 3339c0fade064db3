"""ONNX Runtime's quantizer: dynamic INT8 (integer operators) and static INT8 in QDQ form.

Static calibration reads our samples through `CalibrationReader` (ORT's
CalibrationDataReader protocol), one sample per collection, with the histograms
streamed (ort_histograms.py). Imported only inside the worker.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from edgebuild.errors import StageError
from edgebuild.quant.params import PRESET_EXTRA
from edgebuild.quant.samples import feeds

if TYPE_CHECKING:
    from edgebuild.data.loaders import Samples
    from edgebuild.quant.params import QuantizeParams


class CalibrationReader:
    """onnxruntime's CalibrationDataReader protocol over our samples."""

    def __init__(self, samples: Samples) -> None:
        self._all = list(feeds(samples))
        self._feeds = iter(self._all)

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self._feeds, None)

    def rewind(self) -> None:  # some ORT versions call it between calibration passes
        pass

    def __len__(self) -> int:
        return len(self._all)

    def set_range(self, start_index: int, end_index: int) -> None:
        """ORT's strided calibration: collect from these samples only."""
        self._feeds = iter(self._all[start_index:end_index])


def _types() -> dict[str, Any]:
    from onnxruntime.quantization import QuantType

    return {"int8": QuantType.QInt8, "uint8": QuantType.QUInt8, "uint16": QuantType.QUInt16}


def quantize_dynamic(source: Path, destination: Path, p: QuantizeParams, exclude: list[str],
                     only: list[str] | None = None) -> None:
    """INT8 weights, activations quantized at run time: ONNX Runtime's integer operators
    (ConvInteger, MatMulInteger), for the ONNX Runtime backend only."""
    from onnxruntime.quantization import quantize_dynamic as ort_quantize_dynamic

    preset = PRESET_EXTRA.get(p.preset or "", {})
    ort_quantize_dynamic(source, destination, per_channel=p.per_channel,
                         reduce_range=p.reduce_range is True,
                         weight_type=_types()[p.weight_type],
                         op_types_to_quantize=p.op_types, nodes_to_exclude=exclude,
                         nodes_to_quantize=only,
                         extra_options={**preset, **p.ort_extra_options})


def quantize_static(source: Path, destination: Path, p: QuantizeParams, calibration: Samples,
                    exclude: list[str], scratch: Path, only: list[str] | None = None,
                    overrides: dict[str, Any] | None = None) -> None:
    """Static INT8 in QDQ form, calibrated on `calibration`; `only` restricts quantization
    to those nodes (sensitivity runs), `overrides` are TensorQuantOverrides
    (reduce_range auto).

    Calibration ranges are cached in `scratch`, so the re-quantizations of the
    accuracy-aware search calibrate once.
    """
    from onnxruntime.quantization import CalibrationMethod, QuantFormat
    from onnxruntime.quantization import quantize_static as ort_quantize_static

    types = _types()
    preset = PRESET_EXTRA.get(p.preset or "", {})
    methods = {"minmax": CalibrationMethod.MinMax, "entropy": CalibrationMethod.Entropy,
               "percentile": CalibrationMethod.Percentile}
    extra: dict[str, Any] = {**preset, **p.ort_extra_options,
                             "ActivationSymmetric": p.activation_symmetric,
                             "WeightSymmetric": p.weight_symmetric,
                             "QDQKeepRemovableActivations": p.keep_activations,
                             "DedicatedQDQPair": p.dedicated_qdq_pair}
    if overrides:
        extra["TensorQuantOverrides"] = {**overrides, **extra.get("TensorQuantOverrides", {})}
    if p.method == "percentile":
        extra["CalibPercentile"] = p.percentile
    if p.method != "minmax" or not extra.get("CalibMovingAverage"):
        # One sample per collection, ranges (or histograms) merged between them: min of
        # mins and max of maxes are the same ranges. ORT otherwise holds every
        # intermediate tensor of every sample at once (22.6 GB for 6 pages through
        # PP-PicoDet at 800 x 608, killed by the kernel; its CalibMaxIntermediateOutputs
        # drops the data instead, onnxruntime 1.32), and stacking a tensor's values over
        # the samples of one collection fails when its shape varies (NMS keeps a
        # different number of boxes per image; calibration at several shape profiles).
        extra.setdefault("CalibStridedMinMax", 1)
    from edgebuild.quant.engines.ort_histograms import streamed_histograms

    try:
        with streamed_histograms():
            ort_quantize_static(
                source, destination, CalibrationReader(calibration),
                quant_format=QuantFormat.QDQ,
                op_types_to_quantize=p.op_types, per_channel=p.per_channel,
                reduce_range=p.reduce_range is True,
                activation_type=types[p.activation_type], weight_type=types[p.weight_type],
                nodes_to_exclude=exclude, nodes_to_quantize=only,
                calibrate_method=methods[p.method], extra_options=extra,
                calibration_providers=["CPUExecutionProvider"],
                calibration_cache_path=scratch / "calibration-ranges.json",
            )
    except ValueError as exc:
        if "Quantization parameters are not specified" not in str(exc):
            raise
        raise StageError(
            f"calibration gave no values for a tensor to quantize ({str(exc).split(chr(10))[0]})",
            "it was empty on every calibration sample, as after a NonMaxSuppression that keeps "
            "no box: calibrate on images where the model detects something, or keep the "
            "post-processing in float (quantize.op_types, exclude_nodes)") from exc
    for leftover in Path.cwd().glob("augmented_model*.onnx"):  # older ORT writes it to cwd
        leftover.unlink()


def refuse_custom_nodes(source: Path) -> None:
    """ONNX Runtime's quantizer opens sessions and runs shape inference of its own,
    where a custom node has no kernel: refuse before it fails somewhere inside."""
    from edgebuild.customops.declared import active

    if not active():
        return
    import onnx

    from edgebuild.customops.ort import custom_nodes

    found = sorted(custom_nodes(onnx.load(str(source), load_external_data=False)))
    if found:
        raise StageError(
            f"quantize cannot quantize a graph holding custom op(s) {', '.join(found)}: ONNX "
            "Runtime's quantizer opens its own sessions, without their kernels",
            "decompose the op for this target (`kernels.<backend>: decompose`), or quantize "
            "in the backend (openvino-quantize, the TFLite `precision` option)")
