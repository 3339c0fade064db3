"""quantize: INT8 (dynamic, or static QDQ with calibration) and FP16, for ONNX models.

Static INT8 is written in QDQ form (QuantizeLinear/DequantizeLinear pairs around
float ops): the one INT8 representation every backend here consumes — ONNX
Runtime fuses it, OpenVINO and QNN read it, and TensorRT 10+ accepts *only*
explicit QDQ. The defaults (uint8 asymmetric activations, int8 symmetric
weights) are the accurate and fast choice on x86 CPUs: a ReLU output is never
negative, so symmetric int8 wastes half its range. TensorRT requires symmetric
int8 activations: a TensorRT target sets `activation_type: int8` and
`activation_symmetric: true` (docs/passes.md).

Dynamic INT8 produces ONNX Runtime's integer operators (ConvInteger,
MatMulInteger) and is for the ONNX Runtime backend only.

With `accuracy_aware`, layers are ranked by how much error they add (see
layer_compare.py) and the worst are kept in float, in growing steps, until the
drop on the evaluation dataset is within `max_drop` — bounded by iterations
and seconds. Every step is recorded in the stage's metadata and the report.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from edgebuild.passes.base import Op, OpResult, StageContext
from edgebuild.passes.onnx_stats import graph_stats


class AccuracyAware(BaseModel):
    """Keep the most sensitive layers in float until the drop is within budget."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    dataset: str = Field(description="Evaluation dataset (compared with the FP32 model).")
    metric: Literal["top1_agreement", "top1"] = Field(
        "top1_agreement", description="`top1` needs labels; drop = FP32 value − quantized value.")
    max_drop: float = Field(1.0, ge=0, le=100, description="Largest allowed drop, points.")
    max_iterations: int = Field(8, ge=1, le=64, description="Re-quantizations at most.")
    max_seconds: float = Field(600.0, gt=0, description="Give up after this long.")


class QuantizeParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    mode: Literal["static", "dynamic", "fp16"] = Field(
        description="`static`: INT8 QDQ with calibration; `dynamic`: INT8 weights, "
        "activations quantized at run time (ONNX Runtime only); `fp16`: half precision.")
    calibration: str | None = Field(None, description="Dataset for static calibration.")
    calibration_samples: int = Field(100, ge=1, description="Calibration samples used, at most.")
    method: Literal["minmax", "entropy", "percentile"] = Field(
        "minmax", description="How activation ranges are chosen from calibration data.")
    percentile: float = Field(99.999, gt=90, le=100, description="For `method: percentile`.")
    per_channel: bool = Field(True, description="Per-output-channel weight scales.")
    activation_type: Literal["int8", "uint8"] = Field(
        "uint8", description="uint8 + asymmetric suits ReLU activations on x86 (u8s8 VNNI).")
    weight_type: Literal["int8", "uint8"] = "int8"
    activation_symmetric: bool = Field(
        False, description="Zero point 0; TensorRT needs `activation_type: int8` and this.")
    weight_symmetric: bool = True
    reduce_range: bool = Field(
        False, description="7-bit weights: avoids u8s8 saturation on x86 CPUs without VNNI.")
    op_types: list[str] | None = Field(
        None, description="Only quantize these op types (default: all the quantizer supports).")
    exclude_nodes: list[str] = Field(default_factory=list,
                                     description="Node names kept in float.")
    keep_io_fp32: bool = Field(True, description="fp16: keep float32 inputs and outputs.")
    accuracy_aware: AccuracyAware | None = None
    compare_samples: int = Field(4, ge=0, le=64,
                                 description="Samples for the per-layer error report.")

    @model_validator(mode="after")
    def _calibration_needed(self) -> QuantizeParams:
        if self.mode == "static" and self.calibration is None:
            raise ValueError("mode static needs `calibration: <dataset name>`")
        if self.accuracy_aware is not None and self.mode == "fp16":
            raise ValueError("accuracy_aware applies to INT8 modes")
        return self


class Quantize(Op):
    name = "quantize"
    version = 3
    Params = QuantizeParams
    accepts = ("onnx",)
    produces = "onnx"
    tools: ClassVar[tuple[str, ...]] = ("onnx", "onnxruntime", "numpy")
    summary = "INT8 (dynamic / static QDQ with calibration) or FP16"
    dataset_fields = ("calibration",)

    def run(self, ctx: StageContext, params: Any) -> OpResult:
        from edgebuild.passes import quantize_impl as impl

        p: QuantizeParams = params
        source = ctx.input().main
        destination = ctx.out / "model.onnx"
        calibration = None
        if p.calibration is not None:
            calibration = ctx.dataset(p.calibration)
            if p.calibration_samples < len(calibration):
                calibration = impl.first(calibration, p.calibration_samples)
        metadata: dict[str, Any] = {"mode": p.mode}
        if p.accuracy_aware is not None:
            evaluation = ctx.dataset(p.accuracy_aware.dataset)
            metadata["accuracy_aware"] = impl.accuracy_aware(
                source, destination, p, calibration, evaluation, ctx.out)
        else:
            impl.quantize(source, destination, p, calibration, p.exclude_nodes, ctx.out)
        if p.compare_samples:
            feeds_from = calibration if calibration is not None else None
            metadata["layers"] = impl.layer_report(source, destination, ctx, feeds_from,
                                                   p.compare_samples)
        metadata.update(before=graph_stats(source), after=graph_stats(destination))
        return OpResult(main="model.onnx", format="onnx", metadata=metadata)
