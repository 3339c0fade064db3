"""The ExecuTorch backend's options (a target profile's `options:`), and their enums.

Below everything else in backends/executorch/: backend.py declares
`Backend[ExecutorchOptions]`, and lower.py reads the options it is handed.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, model_validator

from edgebuild.core.datasets import DatasetRef


class Precision(StrEnum):
    FP32 = "fp32"
    INT8 = "int8"  # PT2E static int8: XNNPACKQuantizer, symmetric, calibrated


class Delegate(StrEnum):
    XNNPACK = "xnnpack"  # XnnpackPartitioner: what it takes runs in XNNPACK
    PORTABLE = "portable"  # no delegate: ExecuTorch's portable kernels only


class Observer(StrEnum):
    """How int8 activation ranges are chosen from the calibration data."""

    HISTOGRAM = "histogram"  # XNNPACKQuantizer's: HistogramObserver, the range of least L2 error
    MINMAX = "minmax"  # MinMaxObserver: the range seen (the ONNX quantize pass's default)


class LatencyOn(StrEnum):
    DEVICE = "device"
    HOST = "host"


class ExecutorchOptions(BaseModel):
    """Options of the ExecuTorch backend (target profile `options:`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    precision: Precision = Field(
        Precision.FP32, description="fp32, or int8: PT2E static quantization with "
        "XNNPACKQuantizer (symmetric int8 activations and weights), calibrated on "
        "`calibration_dataset`.")
    delegate: Delegate = Field(
        Delegate.XNNPACK, description="`xnnpack`: XnnpackPartitioner lowers what XNNPACK "
        "takes, the rest runs on portable kernels (the coverage table says which); "
        "`portable`: no delegate.")
    per_channel: bool = Field(
        True, description="With `precision: int8`: one weight scale per output channel "
        "(get_symmetric_quantization_config(is_per_channel=True)).")
    observer: Observer = Field(
        Observer.HISTOGRAM, description="With `precision: int8`: how activation ranges are "
        "chosen: `histogram` (XNNPACKQuantizer's default) or `minmax` (the range seen; "
        "calibrates about 3x faster).")
    fuse_clamps: bool = Field(
        True, description="With `precision: int8`: quantize a conv or linear followed by "
        "ReLU6 (hardtanh) after the clamp, as XNNPACK runs the pair fused; false: "
        "XNNPACKQuantizer's own annotation, which quantizes the conv's output before the "
        "clamp (int8 codes spent on values ReLU6 cuts off).")
    bias_correction: bool = Field(
        True, description="With `precision: int8`: measure each quantized conv/linear's mean "
        "output shift per channel on the calibration data (FP32 input) and subtract it from "
        "its bias, as the quantize pass's `bias_correction` does for ONNX.")
    keep_float: list[str] = Field(
        [], description="With `precision: int8`: modules left unquantized (XNNPACK runs them "
        "in fp32), named as PyTorch names them (`_conv_stem`) or as the ONNX node or output "
        "torch.onnx exports them to (`/_conv_stem/Conv_output_0`), as the quantize pass's "
        "`exclude_nodes` and Core ML's `keep_float` do; an unknown name is an error.")
    calibration_dataset: DatasetRef | None = Field(
        None, description="Recipe dataset the int8 observers are calibrated on.")
    calibration_samples: int = Field(100, ge=1, description="Calibration samples used, at most.")
    latency_on: LatencyOn = Field(
        LatencyOn.DEVICE, description="`device`: the phone (timing a .pte on it is not "
        "implemented yet: not measurable here); `host`: ExecuTorch's runtime on this machine, "
        "reported as host figures.")

    @model_validator(mode="after")
    def _consistent(self) -> ExecutorchOptions:
        if self.precision is Precision.INT8:
            if self.calibration_dataset is None:
                raise ValueError("precision int8 needs `calibration_dataset` (a recipe "
                                 "dataset of representative inputs)")
            if self.delegate is not Delegate.XNNPACK:
                raise ValueError("precision int8 needs `delegate: xnnpack` (XNNPACKQuantizer's "
                                 "int8 ops run in XNNPACK; the portable kernels are float)")
        elif self.keep_float:
            raise ValueError("keep_float names modules to leave unquantized: it needs "
                             "`precision: int8`")
        return self
