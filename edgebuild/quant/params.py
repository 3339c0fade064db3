"""The quantize pass's params: what a recipe writes under `quantize:`.

Static INT8 is written in QDQ form (QuantizeLinear/DequantizeLinear pairs around
float ops): the one INT8 representation every backend here consumes — ONNX
Runtime fuses it, OpenVINO and QNN read it, and TensorRT 10+ accepts *only*
explicit QDQ. The defaults (uint8 asymmetric activations, int8 symmetric
weights) are the accurate and fast choice on x86 CPUs: a ReLU output is never
negative, so symmetric int8 wastes half its range. TensorRT requires symmetric
int8 activations and places Q/DQ its own way: `preset: tensorrt` sets both
(TENSORRT_PRESET below, docs/backends-tensorrt.md).

The JSON dump of `QuantizeParams` (field names, order, defaults) is part of every
quantize stage's cache key: tests/unit/test_int8_params_dump.py pins it.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_serializer, model_validator

from edgebuild.core.datasets import DatasetRef
from edgebuild.quant.safety import DEFAULT_BOUND, KeepFloat
from edgebuild.recipe.accuracy import AccuracyGate


class AccuracyAware(BaseModel):
    """Keep the most sensitive layers in float until the drop is within budget."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    dataset: DatasetRef = Field(description="Evaluation dataset (compared with the FP32 model).")
    metric: Literal["top1_agreement", "top1"] = Field(
        "top1_agreement", description="`top1` needs labels; drop = FP32 value − quantized value.")
    max_drop: float = Field(1.0, ge=0, le=100, description="Largest allowed drop, points.")
    max_iterations: int = Field(8, ge=1, le=64, description="Re-quantizations at most.")
    max_seconds: float = Field(600.0, gt=0, description="Give up after this long.")


BudgetStep = Literal["percentile", "entropy", "reduce_range", "bias_correction", "equalize",
                     "seq_mse", "adaround", "keep_float"]
DEFAULT_STEPS: tuple[BudgetStep, ...] = ("percentile", "entropy", "reduce_range",
                                         "bias_correction", "equalize", "keep_float")


class BudgetGate(AccuracyGate):
    """The target's accuracy gate (same keys), whose dataset the pass reads."""

    dataset: DatasetRef = Field(description="Name of a dataset in `datasets:`.")


class FidelityBudget(BaseModel):
    """Find the cheapest INT8 configuration whose output passes `gate` (quant/search/budget.py)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    gate: BudgetGate = Field(description="The accuracy gate the build must pass, as under "
                             "`gates.accuracy` (a YAML anchor can share the target's).")
    steps: list[BudgetStep] = Field(
        default_factory=lambda: list(DEFAULT_STEPS), min_length=1,
        description="Levers tried after the params as written, in order, until the gate "
        "passes: `percentile`/`entropy` replace the calibration method; `reduce_range` (auto), "
        "`bias_correction` and `equalize` (CLE exact) are added to the best configuration so "
        "far and kept if they raise the headroom; `seq_mse`/`adaround` switch to engine "
        "aimet with that weight rounding (skipped, with the reason, when aimet-onnx is not "
        "installed); `keep_float` (last) keeps the fewest most sensitive layers in float.")
    max_iterations: int = Field(8, ge=1, le=64,
                                description="`keep_float`: re-quantizations at most.")
    max_seconds: float = Field(1800.0, gt=0, description="Stop trying after this long.")

    @field_serializer("gate")
    def _as_written(self, gate: BudgetGate) -> dict[str, Any]:
        """The gate as the recipe wrote it: its validators tell a key the user set from a
        default, so the planner's dump-then-validate must not set every key (it failed
        "score_threshold … are for detection outputs" on any budget)."""
        return gate.model_dump(mode="json", exclude_unset=True)

    @model_validator(mode="after")
    def _ordered(self) -> FidelityBudget:
        if len(set(self.steps)) != len(self.steps):
            raise ValueError(f"budget.steps names a step twice: {self.steps}")
        if "keep_float" in self.steps and self.steps[-1] != "keep_float":
            raise ValueError("keep_float must be the last budget step: it is the one lever "
                             "that costs run time, so every free lever is tried first")
        return self


class Equalization(BaseModel):
    """Cross-layer equalization (Nagel et al. 2019) of conv -> activation -> conv chains."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    clip: Literal["exact", "calibrated", "relu"] = Field(
        "exact", description="ReLU6 (`Clip(0, 6)`) is not scale-invariant. `exact`: scale a "
        "channel only where its pre-activation is proven (interval arithmetic over the "
        "calibration data's input range) to stay below the clip, so the FP32 function is "
        "unchanged; `calibrated`: the same with the largest value seen on the calibration "
        "data (equal on that data only); `relu`: the paper's choice, ReLU6 becomes ReLU "
        "(changes the function).")
    max_iterations: int = Field(20, ge=1, le=1000,
                                description="Equalization sweeps over all pairs, at most.")


# extra_options of onnxruntime.quantization.quantize_static that recipes may pass through.
# The ones edgebuild sets from its own params are not in this list.
ORT_EXTRA_OPTIONS = frozenset({
    "ForceQuantizeNoInputCheck", "MatMulConstBOnly", "AddQDQPairToWeight",
    "OpTypesToExcludeOutputQuantization", "QDQOpTypePerChannelSupportToAxis",
    "QDQDisableWeightAdjustForInt32Bias", "QuantizeBias", "MinimumRealRange",
    "ActivationRestrictedAsymmetric", "CalibMovingAverage", "CalibMovingAverageConstant",
    "CalibTensorRangeSymmetric", "CalibMaxIntermediateOutputs", "CalibStridedMinMax",
    "TensorQuantOverrides", "UseQDQContribOps", "QDQOpTypePerChannelSupportThreshold",
})


# TensorRT's explicit quantization (its developer guide, "Q/DQ layer placement"): int8
# only, symmetric (zero point 0) activations, per-channel symmetric weights, and Q/DQ on
# the *inputs* of the layers that have int8 kernels — TensorRT fuses DQ → layer → Q of
# the next layer itself; a quantized output would only add a requantization. Biases stay
# float (TensorRT has no int32 DequantizeLinear; it quantizes biases itself).
TENSORRT_OPS = ("Conv", "ConvTranspose", "Gemm", "MatMul")
TENSORRT_PRESET: dict[str, Any] = {
    "mode": "static", "activation_type": "int8", "activation_symmetric": True,
    "weight_type": "int8", "weight_symmetric": True, "per_channel": True,
    "op_types": list(TENSORRT_OPS)}
TENSORRT_EXTRA: dict[str, Any] = {"QuantizeBias": False,
                                  "OpTypesToExcludeOutputQuantization": list(TENSORRT_OPS)}

# Transformer encoders (BERT, MiniLM): only the weight GEMMs go to INT8. Softmax,
# LayerNorm, GELU and the activation x activation MatMuls of attention (Q.K^T, P.V)
# stay float — their ranges are wide and outlier-heavy, and quantizing them is what
# took a static INT8 MiniLM to cosine 0.39. Per-channel weights keep each output
# column's own scale (per-tensor: cosine 0.950 on all-MiniLM-L6-v2 at 128 tokens,
# per-channel: 0.995).
TRANSFORMER_OPS = ("MatMul", "Gemm")
TRANSFORMER_PRESET: dict[str, Any] = {"per_channel": True, "op_types": list(TRANSFORMER_OPS)}
TRANSFORMER_EXTRA: dict[str, Any] = {"MatMulConstBOnly": True}
PRESETS: dict[str, dict[str, Any]] = {"tensorrt": TENSORRT_PRESET,
                                      "transformer": TRANSFORMER_PRESET}
PRESET_EXTRA: dict[str, dict[str, Any]] = {"tensorrt": TENSORRT_EXTRA,
                                           "transformer": TRANSFORMER_EXTRA}


# Params ONNX Runtime's quantizer honours and the AIMET engine cannot.
AIMET_REFUSES: dict[str, tuple[Any, ...]] = {
    "mode": ("dynamic", "fp16"), "method": ("percentile",), "preset": ("tensorrt", "transformer"),
    "reduce_range": (True, "auto"), "weight_type": ("uint8",), "activation_symmetric": (True,),
    "activation_type": ("uint16",)}


class QuantizeParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    preset: Literal["tensorrt", "transformer"] | None = Field(
        None, description="`tensorrt`: Q/DQ as TensorRT's explicit quantization wants it "
        "(symmetric int8 activations, per-channel int8 weights, Q/DQ on the inputs of "
        "Conv/ConvTranspose/Gemm/MatMul, float bias). `transformer`: only the weight "
        "MatMul/Gemm in INT8 (per-channel), attention score MatMuls, Softmax, LayerNorm and "
        "GELU kept float; static or dynamic. Sets those params; setting one of them "
        "differently is an error.")
    mode: Literal["static", "dynamic", "fp16"] = Field(
        description="`static`: INT8 QDQ with calibration; `dynamic`: INT8 weights, "
        "activations quantized at run time (ONNX Runtime only); `fp16`: half precision.")
    engine: Literal["onnxruntime", "aimet"] = Field(
        "onnxruntime", description="Who computes the static INT8 encodings: ONNX Runtime's "
        "quantizer, or Qualcomm's AIMET (optional extra `edgebuild[aimet]`; `method` minmax "
        "or entropy — AIMET's TF-enhanced; with `weight_rounding`). Both write QDQ ONNX.")
    weight_rounding: Literal["nearest", "seq_mse", "adaround"] = Field(
        "nearest", description="engine aimet: `seq_mse` searches each layer's weight scale "
        "for the least output error, `adaround` learns each weight's rounding direction "
        "(`adaround_iterations` per layer), both on the calibration data.")
    adaround_iterations: int = Field(1000, ge=1, le=20000,
                                     description="AdaRound optimisation steps per layer.")
    seq_mse_candidates: int = Field(20, ge=1, le=100,
                                    description="Sequential MSE: scales tried per layer.")
    calibration: DatasetRef | None = Field(None, description="Dataset for static calibration.")
    calibration_samples: int = Field(100, ge=1, description="Calibration samples used, at most.")
    method: Literal["minmax", "entropy", "percentile"] = Field(
        "minmax", description="How activation ranges are chosen from calibration data.")
    percentile: float = Field(99.999, gt=90, le=100, description="For `method: percentile`.")
    per_channel: bool = Field(True, description="Per-output-channel weight scales.")
    activation_type: Literal["int8", "uint8", "uint16"] = Field(
        "uint8", description="uint8 + asymmetric suits ReLU activations on x86 (u8s8 VNNI). "
        "`uint16`: 16-bit activations with 8-bit weights (W8A16), for a backend that runs "
        "them — Qualcomm's HTP (`precision: qdq`); CPU runtimes have no 16-bit activation "
        "kernels. ONNX Runtime's quantizer writes the model at opset 21 (16-bit Q/DQ).")
    weight_type: Literal["int8", "uint8"] = "int8"
    activation_symmetric: bool = Field(
        False, description="Zero point 0; TensorRT needs `activation_type: int8` and this.")
    weight_symmetric: bool = True
    reduce_range: bool | Literal["auto"] = Field(
        False, description="7-bit weights: avoids u8s8 saturation on x86 CPUs without VNNI "
        "(int16 pair sums in `vpmaddubsw`). `auto`: only for the layers whose pair sums "
        "overflow on more than `saturation_tolerance` of the calibration data (static).")
    saturation_tolerance: float = Field(
        1e-5, ge=0, le=1, description="`reduce_range: auto`: the largest tolerated fraction "
        "of overflowing u8s8 pair sums in a layer.")
    op_types: list[str] | None = Field(
        None, description="Only quantize these op types (default: all the quantizer supports).")
    exclude_nodes: list[str] = Field(default_factory=list,
                                     description="Node names kept in float.")
    keep_float: KeepFloat = Field(
        KeepFloat.AUTO, description="`auto`: the output tail (every node after the last "
        "weight layer on the way to a graph output: decode, NMS, final Sigmoid/Softmax, "
        "output Concat) and a signal front end (STFT/DFT/Pad before the first weight layer) "
        "stay float; `none`: only `exclude_nodes` and the mixed-range rule.")
    mixed_range_bound: float | None = Field(
        DEFAULT_BOUND, gt=1, description="A Concat/Add whose inputs' calibrated ranges "
        "differ by more than this factor stays float (each input keeps its own scale); "
        "null: off. 16 leaves the narrowest input 16 of the 256 codes.")
    keep_io_fp32: bool = Field(True, description="fp16: keep float32 inputs and outputs.")
    equalize: Equalization | None = Field(
        None, description="Cross-layer equalization before quantizing (needs `calibration` "
        "for the input range unless `clip: relu`).")
    bias_correction: bool = Field(
        False, description="Static only: measure each quantized Conv/Gemm's mean output shift "
        "on the calibration data (FP32 input) and subtract it from its bias.")
    keep_activations: bool = Field(
        False, description="Keep Relu/Clip as float nodes with their own QDQ instead of "
        "folding them into the producer's output range (ORT `QDQKeepRemovableActivations`).")
    dedicated_qdq_pair: bool = Field(
        False, description="One Q/DQ pair per consumer of a tensor (ORT `DedicatedQDQPair`).")
    ort_extra_options: dict[str, bool | int | float | str | list[str] | dict[str, Any]] = \
        Field(default_factory=dict, description="More `extra_options` for ONNX Runtime's "
              "quantize_static, e.g. `ForceQuantizeNoInputCheck`, "
              "`QDQOpTypePerChannelSupportThreshold`, `TensorQuantOverrides`.")
    accuracy_aware: AccuracyAware | None = None
    budget: FidelityBudget | None = Field(
        None, description="A fidelity budget instead of knobs: try the levers cheapest first "
        "and keep the first configuration passing `budget.gate` (static only); what was "
        "tried and chosen, and why, is the stage's `budget` metadata.")
    compare_samples: int = Field(4, ge=0, le=64,
                                 description="Samples for the per-layer error report.")
    emit: Literal["qdq", "corrected-float"] = Field(
        "qdq", description="`qdq`: the quantized model. `corrected-float`: the *float* "
        "model with the biases `bias_correction` measured for this quantization (layers "
        "kept float keep theirs), no Q/DQ: for a backend that quantizes itself with the "
        "same scheme and has no bias correction — TFLite full-integer (int8 asymmetric "
        "activations, `activation_type: int8`; symmetric per-channel int8 weights).")

    @model_validator(mode="before")
    @classmethod
    def _apply_preset(cls, data: Any) -> Any:
        if not isinstance(data, dict) or data.get("preset") not in PRESETS:
            return data
        preset = PRESETS[data["preset"]]
        clashes = [f"{k}: {data[k]}" for k, v in preset.items()
                   if k in data and data[k] != v and k != "op_types"]
        if clashes:
            why = ("TensorRT takes symmetric int8 only" if data["preset"] == "tensorrt" else
                   "per-tensor weights lose an encoder's accuracy")
            raise ValueError(f"preset {data['preset']} sets {', '.join(clashes)} differently "
                             f"({why}); remove them")
        if data["preset"] == "transformer" and data.get("mode") == "fp16":
            raise ValueError("preset transformer is an INT8 preset; mode fp16 takes no preset")
        return {**preset, **data}

    @model_validator(mode="after")
    def _calibration_needed(self) -> QuantizeParams:
        if self.mode == "static" and self.calibration is None:
            raise ValueError("mode static needs `calibration: <dataset name>`")
        if self.accuracy_aware is not None and self.mode == "fp16":
            raise ValueError("accuracy_aware applies to INT8 modes")
        if self.budget is not None and self.mode != "static":
            raise ValueError("budget needs mode static (its levers are calibration's)")
        if self.budget is not None and self.accuracy_aware is not None:
            raise ValueError("budget and accuracy_aware both keep layers in float: use "
                             "budget (its `keep_float` step) alone")
        if self.reduce_range == "auto" and self.mode != "static":
            raise ValueError("reduce_range auto needs mode static (it measures saturation "
                             "with the calibration data)")
        if self.bias_correction and self.mode != "static":
            raise ValueError("bias_correction needs mode static (it measures with the "
                             "calibration data)")
        if self.equalize is not None and self.equalize.clip != "relu" and \
                self.calibration is None:
            raise ValueError(f"equalize.clip {self.equalize.clip} needs `calibration: <dataset>` "
                             "(the input range bounds each channel); or use clip: relu")
        self._engine_fits()
        self._emit_fits()
        self._sixteen_bit_fits()
        unknown = sorted(set(self.ort_extra_options) - ORT_EXTRA_OPTIONS)
        if unknown:
            raise ValueError(f"ort_extra_options {unknown} are not passed through; allowed: "
                             f"{sorted(ORT_EXTRA_OPTIONS)} (the others have their own params)")
        return self


    def _sixteen_bit_fits(self) -> None:
        if self.activation_type != "uint16":
            return
        wrong = [why for bad, why in (
            (self.mode != "static", "mode static"),
            (self.reduce_range is not False, "no reduce_range (7-bit weights cure u8s8 pair "
             "sums of x86 CPUs without VNNI, which have no 16-bit activation kernels)"),
            (self.emit != "qdq", "emit qdq (TFLite's converter quantizes to 8 bits)")) if bad]
        if wrong:
            raise ValueError(f"activation_type uint16 needs {'; '.join(wrong)}")

    def _emit_fits(self) -> None:
        if self.emit == "qdq":
            return
        wrong = [why for bad, why in (
            (not self.bias_correction, "bias_correction: true (the correction is the output)"),
            (self.mode != "static", "mode static"),
            (self.engine != "onnxruntime", "engine onnxruntime"),
            (self.budget is not None or self.accuracy_aware is not None,
             "no budget / accuracy_aware (they judge the Q/DQ model, which is not emitted)"),
            (self.equalize is not None, "no equalize (the float function would change "
             "unseen by the backend's own calibration)")) if bad]
        if wrong:
            raise ValueError(f"emit corrected-float needs {'; '.join(wrong)}")

    def _engine_fits(self) -> None:
        if self.engine == "onnxruntime":
            if self.weight_rounding != "nearest":
                raise ValueError(f"weight_rounding {self.weight_rounding} needs engine aimet "
                                 "(ONNX Runtime's quantizer rounds to nearest)")
            return
        wrong = [f"{k}: {v}" for k, v in (("mode", self.mode), ("method", self.method),
                                          ("preset", self.preset),
                                          ("reduce_range", self.reduce_range),
                                          ("weight_type", self.weight_type),
                                          ("activation_type", self.activation_type),
                                          ("activation_symmetric", self.activation_symmetric))
                 if k in self.model_fields_set and v in AIMET_REFUSES.get(k, ())]
        if self.op_types is not None or self.ort_extra_options:
            wrong.append("op_types / ort_extra_options (ONNX Runtime's)")
        if wrong:
            raise ValueError(f"engine aimet does not take {', '.join(wrong)}: it quantizes "
                             "statically (int8 symmetric weights, asymmetric activations), "
                             "method minmax or entropy")

