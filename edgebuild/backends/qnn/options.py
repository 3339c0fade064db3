"""The QNN backend's options (a target profile's `options:`) and the QNN EP's provider
options they make.

Below the rest of backends/qnn/: backend.py declares `Backend[QnnOptions]`; the runner
and the emulator's profiler (profile.py) read the options they are handed.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, model_validator

from edgebuild.core.datasets import DatasetRef
from edgebuild.quant.safety import DEFAULT_BOUND, KeepFloat


class QnnPrecision(StrEnum):
    INT8 = "int8"  # uint8 activations and weights, QDQ (the HTP's native format)
    INT16 = "int16"  # uint16 activations, uint8 weights: more accuracy, slower
    FP16 = "fp16"  # the float model run at fp16 on HTP (v69 and newer)
    QDQ = "qdq"  # the input's own Q/DQ as is (a quantize pass before: shared encodings)


class CpuFallback(StrEnum):
    FAIL = "fail"  # a node the HTP cannot take fails the build, naming it
    REPORT = "report"  # it runs on the CPU and is listed in the partition table


class QnnOptions(BaseModel):
    """Options of the QNN backend (target profile `options:`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    precision: QnnPrecision = Field(
        QnnPrecision.INT8, description="int8, int16 or fp16; `qdq`: the model's own Q/DQ "
        "as is, not re-quantized (a `quantize` pass before it: the encodings the other Q/DQ "
        "backends get; the HTP takes uint8 asymmetric activations, not symmetric int8).")
    calibration_dataset: DatasetRef | None = Field(
        None, description="Recipe dataset for int8/int16 calibration.")
    calibration_samples: int = Field(100, ge=1, description="Calibration samples, at most.")
    per_channel: bool = Field(
        True, description="Per-channel weight scales on Conv/ConvTranspose (the HTP takes "
        "them; onnxruntime's QNN recipe keeps MatMul per-tensor, which the HTP requires). "
        "false: per-tensor everywhere.")
    keep_float: KeepFloat = Field(
        KeepFloat.AUTO, description="int8/int16, as the quantize pass: `auto` keeps the output "
        "tail (decode, final Sigmoid/Softmax, output Concat) and a signal front end out of "
        "the QDQ (the HTP runs them in fp16; the partition table shows any it refuses); "
        "`none` does not.")
    mixed_range_bound: float | None = Field(
        DEFAULT_BOUND, gt=1, description="int8/int16, as the quantize pass: a Concat/Add "
        "whose inputs' calibrated ranges differ by more than this factor stays float; "
        "null: off.")
    soc_model: int = Field(43, ge=0, description="QNN SoC model the context binary is built "
                           "for (43: Snapdragon 8 Gen 2, SM8550).")
    htp_arch: int = Field(73, ge=68, description="Hexagon HTP architecture (73: v73).")
    htp_performance_mode: str = Field(
        "burst", pattern="^(burst|balanced|default|high_performance|high_power_saver|"
        "low_balanced|low_power_saver|power_saver|extreme_power_saver|sustained_high_"
        "performance)$", description="HTP performance mode on the device.")
    vtcm_mb: int | None = Field(None, ge=1, le=64, description="VTCM size in MB to use.")
    cpu_fallback: CpuFallback = Field(
        CpuFallback.FAIL, description="`fail`: a node the HTP cannot take fails the build "
        "and is named; `report`: it runs on the CPU and the partition table lists it.")
    device_serial: str | None = Field(
        None, description="Deprecated: name the phone in the profile's `runs_on: {kind: "
        "adb, serial: …}`. adb serial of the phone.")

    @model_validator(mode="after")
    def _calibrated(self) -> QnnOptions:
        if self.precision in (QnnPrecision.INT8, QnnPrecision.INT16) and \
                self.calibration_dataset is None:
            raise ValueError(f"precision {self.precision.value} needs `calibration_dataset` "
                             "(a recipe dataset of representative inputs)")
        return self

    def provider_options(self) -> dict[str, str]:
        """The QNN EP's provider options for these settings."""
        found = {"soc_model": str(self.soc_model), "htp_arch": str(self.htp_arch),
                 "htp_performance_mode": self.htp_performance_mode}
        if self.vtcm_mb is not None:
            found["vtcm_mb"] = str(self.vtcm_mb)
        if self.precision is QnnPrecision.FP16:
            found["enable_htp_fp16_precision"] = "1"
        return found
