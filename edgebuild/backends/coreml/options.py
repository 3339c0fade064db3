"""Options of the Core ML backend (a target profile's `options:`)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from edgebuild.passes.torch_capture import Capture

# coremltools' deployment targets an mlprogram can have (mlprogram needs iOS 15 / macOS 12).
DEPLOYMENT_TARGETS = ("iOS15", "iOS16", "iOS17", "iOS18", "macOS12", "macOS13", "macOS14",
                      "macOS15", "watchOS8", "watchOS9", "watchOS10", "watchOS11", "tvOS15",
                      "tvOS16", "tvOS17", "tvOS18")

# The first release of each OS whose opset (iOS 18's) has per-block int8 weights.
PER_BLOCK_SINCE = {"iOS": 18, "macOS": 15, "watchOS": 11, "tvOS": 18}


def _os(target: str) -> str:
    return target.rstrip("0123456789")


def _release(target: str) -> int:
    return int(target[len(_os(target)):])


class CoreMlOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    capture: Capture = Field(
        Capture.EXPORT, description="How the PyTorch model is captured: `export` "
        "(torch.export), `script` (torch.jit.script: keeps control flow) or `trace` "
        "(torch.jit.trace; checked against eager PyTorch).")
    compute_precision: Literal["fp16", "fp32"] = Field(
        "fp16", description="Precision the mlprogram computes in (the Neural Engine "
        "computes in fp16 only: fp32 ops run on the GPU or CPU).")
    compute_units: Literal["all", "cpu_only", "cpu_and_gpu", "cpu_and_ne"] = Field(
        "all", description="Compute units Core ML may use.")
    minimum_deployment_target: str = Field(
        "iOS16", description=f"Oldest OS the model loads on: {', '.join(DEPLOYMENT_TARGETS)}.")
    weights: Literal["none", "int8", "palettize"] = Field(
        "none", description="Weight compression: `int8` (linear symmetric, per output "
        "channel) or `palettize` (k-means look-up table of `palettize_bits`).")
    palettize_bits: int = Field(6, ge=1, le=8, description="Bits per palettized weight.")
    int8_mode: Literal["linear_symmetric", "linear"] = Field(
        "linear_symmetric", description="`weights: int8`: `linear_symmetric` (scale = "
        "max|w| / 127, no zero point) or `linear` (affine: the range [min(w, 0), max(w, 0)] "
        "in 256 steps with a zero point).")
    granularity: Literal["per_channel", "per_block"] = Field(
        "per_channel", description="`weights: int8`: one scale per output channel, or per "
        "block of `block_size` input channels of each output channel (`per_block` needs "
        "`minimum_deployment_target` iOS18 / macOS15 or later; a weight whose input "
        "channels `block_size` does not divide, e.g. a depthwise conv's, stays float16).")
    block_size: int = Field(32, ge=1, description="Input channels per scale with "
                            "`granularity: per_block`.")
    keep_float: list[str] = Field(
        [], description="Layers whose weights stay float16 (not compressed), named as the "
        "recipe names them elsewhere: the PyTorch module (`_blocks.0._project_conv`) or the "
        "ONNX node or output it exports to (`/_blocks.0/_project_conv/Conv`, "
        "`/_conv_stem/Conv_output_0`); an unknown name is an error.")
    weight_threshold: int = Field(
        2048, ge=0, description="Only weights with more elements are compressed "
        "(coremltools' default).")
    shape_range_max: int | None = Field(
        None, ge=1, description="Upper bound of each dynamic axis (a range shape); none: "
        "unbounded. The Neural Engine prefers enumerated shapes.")
    enumerated_shapes: dict[str, list[list[int]]] | None = Field(
        None, description="Input name -> the exact shapes it may take (instead of a range); "
        "for TorchScript captures (trace, script).")
    check_samples: int = Field(2, ge=1, le=64, description="Random inputs (and their "
                               "negations) the capture is checked on.")
    atol: float = Field(1e-4, ge=0, description="Absolute tolerance of the capture check.")
    rtol: float = Field(1e-3, ge=0, description="Relative tolerance of the capture check.")

    @model_validator(mode="after")
    def _consistent(self) -> CoreMlOptions:
        if self.minimum_deployment_target not in DEPLOYMENT_TARGETS:
            raise ValueError(f"minimum_deployment_target '{self.minimum_deployment_target}' "
                             f"is not one of {', '.join(DEPLOYMENT_TARGETS)}")
        if self.granularity == "per_block":
            if self.weights != "int8":
                raise ValueError("granularity: per_block applies to `weights: int8`")
            if _release(self.minimum_deployment_target) < PER_BLOCK_SINCE[
                    _os(self.minimum_deployment_target)]:
                since = PER_BLOCK_SINCE[_os(self.minimum_deployment_target)]
                raise ValueError(
                    f"granularity: per_block needs minimum_deployment_target "
                    f"{_os(self.minimum_deployment_target)}{since} or later (the iOS 18 "
                    f"opset's constexpr_blockwise_shift_scale), not "
                    f"{self.minimum_deployment_target}")
        if self.keep_float and self.weights == "none":
            raise ValueError("keep_float names layers to leave uncompressed: it needs "
                             "`weights: int8` or `palettize`")
        if self.enumerated_shapes and self.capture is Capture.EXPORT:
            raise ValueError("enumerated_shapes needs `capture: trace` or `script` "
                             "(torch.export declares dynamic axes as ranges)")
        return self
