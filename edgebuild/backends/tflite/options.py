"""The TFLite backend's options (a target profile's `options:`), and their enums.

Below everything else in backends/tflite/: backend.py declares `Backend[TfliteOptions]`,
and convert.py and keep_float.py read the options they are handed.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, model_validator

from edgebuild.core.datasets import DatasetRef
from edgebuild.quant.safety import DEFAULT_BOUND, KeepFloat


class Precision(StrEnum):
    FLOAT32 = "float32"
    FLOAT16 = "float16"
    DYNAMIC_INT8 = "dynamic-int8"
    INT8 = "int8"
    INT16X8 = "int16x8"


class IoType(StrEnum):
    FLOAT32 = "float32"
    INT8 = "int8"
    UINT8 = "uint8"


class Delegate(StrEnum):
    NNAPI = "nnapi"
    GPU = "gpu"
    XNNPACK = "xnnpack"
    CPU = "cpu"


class DelegateFallback(StrEnum):
    BUILTIN = "builtin"  # run on TFLite's builtin kernels, and say so in the figures
    FAIL = "fail"  # the stage fails, naming the layer the delegate refused


class LatencyOn(StrEnum):
    DEVICE = "device"
    HOST = "host"


class TfliteRuntimeOptions(BaseModel):
    """How a .tflite runs: delegate, phone, latency. Every backend whose artifact is a
    .tflite has these (tflite, litert-torch: the same interpreter, delegates and phone)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    delegate: Delegate = Field(
        Delegate.XNNPACK, description="Delegate on the device: nnapi, gpu, xnnpack or cpu. "
        "On the host the interpreter uses XNNPACK (cpu: builtin kernels).")
    delegate_fallback: DelegateFallback = Field(
        DelegateFallback.BUILTIN, description="When the delegate refuses the model (XNNPACK: "
        "an int8 layer whose requantization scale it cannot take, named in the message; on "
        "a phone, any delegate benchmark_model cannot apply): `builtin` runs TFLite's "
        "builtin kernels instead and labels every figure with it; `fail` fails the stage.")
    android_api_level: int = Field(
        30, ge=27, le=36, description="Android API level of the device: decides which ops "
        "the NNAPI delegate takes (the coverage table).")
    latency_on: LatencyOn = Field(
        LatencyOn.DEVICE, description="`device`: benchmark_model on the phone over adb (not "
        "measurable without one); `host`: this machine's interpreter, reported as host figures.")
    device_serial: str | None = Field(
        None, description="Deprecated: name the phone in the profile's `runs_on: {kind: adb, "
        "serial: …}`. adb serial of the phone; default: the only one attached.")
    benchmark_model: str | None = Field(
        None, description="Host path of an Android benchmark_model binary to push; default: "
        "/data/local/tmp/benchmark_model on the device.")


class TfliteOptions(TfliteRuntimeOptions):
    """Options of the TFLite backend (target profile `options:`)."""

    precision: Precision = Field(
        Precision.FLOAT32, description="float32, float16 (fp16 weights), dynamic-int8 (int8 "
        "weights), int8 (full integer, calibrated) or int16x8 (16-bit activations, calibrated).")
    io_type: IoType = Field(
        IoType.FLOAT32, description="With `precision: int8`: the model's input/output type. "
        "int8 or uint8 make the whole graph integer, as NNAPI and most NPUs prefer.")
    calibration_dataset: DatasetRef | None = Field(
        None, description="Recipe dataset for int8/int16x8 calibration (the representative "
        "dataset).")
    calibration_samples: int = Field(100, ge=1, description="Calibration samples used, at most.")
    per_channel: bool = Field(True, description="Per-channel weight scales (TFLite's default).")
    keep_float: KeepFloat = Field(
        KeepFloat.AUTO, description="With `precision: int8`, as the quantize pass: `auto` "
        "keeps the output tail (decode, final Sigmoid/Softmax, output Concat) and a signal "
        "front end float; `none` does not. Metadata `kept_float` says what TFLite honoured.")
    exclude_nodes: list[str] = Field(
        default_factory=list, description="With `precision: int8`: ONNX nodes (of the model "
        "onnx2tf converted, as the quantize pass's `exclude_nodes` name them) kept float too, "
        "with the Relu/Clip TFLite would fuse into them. Metadata `kept_float` says which "
        "TFLite honoured.")
    mixed_range_bound: float | None = Field(
        DEFAULT_BOUND, gt=1, description="With `precision: int8`, as the quantize pass: a "
        "Concat/Add whose inputs' calibrated ranges differ by more than this factor stays "
        "float; null: off.")
    @model_validator(mode="after")
    def _consistent(self) -> TfliteOptions:
        calibrated = self.precision in (Precision.INT8, Precision.INT16X8)
        if calibrated and self.calibration_dataset is None:
            raise ValueError(f"precision {self.precision.value} needs `calibration_dataset` "
                             "(a recipe dataset of representative inputs)")
        if self.io_type is not IoType.FLOAT32 and self.precision is not Precision.INT8:
            raise ValueError("io_type int8/uint8 needs `precision: int8`")
        return self
