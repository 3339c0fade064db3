"""The OpenVINO backend's options (a target profile's `options:`), and the
`compile_model` config they make.

Below the rest of backends/openvino/: backend.py declares `Backend[OpenVinoOptions]`;
quantize.py (`openvino-quantize`) shapes its model by the same options.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator


class Device(StrEnum):
    CPU = "CPU"
    GPU = "GPU"
    NPU = "NPU"


class InferencePrecision(StrEnum):
    F32 = "f32"
    F16 = "f16"
    BF16 = "bf16"
    DEFAULT = "default"  # no INFERENCE_PRECISION_HINT: whatever the device picks


class PerformanceHint(StrEnum):
    LATENCY = "latency"
    THROUGHPUT = "throughput"


class Shapes(StrEnum):
    STATIC = "static"
    DYNAMIC = "dynamic"


class OpenVinoOptions(BaseModel):
    """Options of the OpenVINO backend (target profile `options:`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    device: Device = Field(Device.CPU, description="OpenVINO device: CPU, GPU or NPU.")
    inference_precision: InferencePrecision = Field(
        InferencePrecision.F32,
        description="INFERENCE_PRECISION_HINT: f32, bf16 or f16; `default` sets no hint "
        "(the device's choice: bf16 on CPUs with AVX-512 BF16 or AMX, f32 on other x86 "
        "CPUs). f32 by default, so numerics do not change with the CPU. What really ran "
        "is read back and labelled in the report.")
    compress_to_fp16: bool = Field(
        False, description="Store weights as FP16 in the .bin (OpenVINO's save_model default "
        "is true; false keeps an FP32 model FP32).")
    performance_hint: PerformanceHint = Field(
        PerformanceHint.LATENCY, description="PERFORMANCE_HINT: latency or throughput.")
    num_streams: int | None = Field(
        None, ge=1, description="NUM_STREAMS; default: what the performance hint picks.")
    inference_num_threads: int | None = Field(
        None, ge=1, description="INFERENCE_NUM_THREADS (CPU) when the target's "
        "`measure.threads` is not set.")
    shapes: Shapes = Field(
        Shapes.STATIC, description="`static`: fix every input shape in the IR (a dynamic "
        "dimension takes the recipe's declared example shape unless `input_shapes` says "
        "otherwise); `dynamic`: keep the model's dynamic dimensions.")
    input_shapes: dict[str, list[int]] = Field(
        default_factory=dict, description="With `shapes: static`: input name -> shape.")

    @model_validator(mode="after")
    def _shapes(self) -> OpenVinoOptions:
        if self.input_shapes and self.shapes is Shapes.DYNAMIC:
            raise ValueError("`input_shapes` fixes shapes; it needs `shapes: static`")
        for name, shape in self.input_shapes.items():
            if not shape or any(d < 1 for d in shape):
                raise ValueError(f"input_shapes.{name}: every dimension must be >= 1")
        return self


def runtime_config(options: OpenVinoOptions, threads: int | None) -> dict[str, Any]:
    """The `compile_model` config: the options as OpenVINO property names.

    `threads` (the target's `measure.threads`) wins over `inference_num_threads`,
    as it does for ONNX Runtime, so every backend is measured on the same cores.
    """
    config: dict[str, Any] = {"PERFORMANCE_HINT": options.performance_hint.value.upper()}
    if options.inference_precision is not InferencePrecision.DEFAULT:
        config["INFERENCE_PRECISION_HINT"] = options.inference_precision.value
    if options.num_streams is not None:
        config["NUM_STREAMS"] = options.num_streams
    chosen = threads or options.inference_num_threads
    if chosen and options.device is Device.CPU:  # a thread count means nothing to a GPU/NPU
        config["INFERENCE_NUM_THREADS"] = chosen
    return config
