"""The TensorRT target profile's `options:`, and the `trtexec` line they amount to."""

from __future__ import annotations

import shlex
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from edgebuild.backends.tensorrt.fp16 import SENSITIVE_OPS
from edgebuild.core.datasets import DatasetRef

MODEL = "model.onnx"  # the TensorRT-ready ONNX: compile writes it; an engine is built from it

class TrtPrecision(StrEnum):
    FP32 = "fp32"
    FP16 = "fp16"  # mixed FP16/FP32 ONNX (fp16.py), strongly typed
    INT8 = "int8"  # explicit Q/DQ from the quantize pass (`preset: tensorrt`)


class Typing(StrEnum):
    STRONG = "strong"  # the ONNX's types decide (TensorRT 10 and 11)
    WEAK = "weak"  # TensorRT 10 only: builder flags let it pick FP16/INT8 kernels itself


class Unsupported(StrEnum):
    FAIL = "fail"  # a node the parser's matrix does not list fails compile, named
    REPORT = "report"  # listed in the coverage table; the device build will need a plugin


class ShapeProfile(BaseModel):
    """One input's optimization profile: the engine accepts min..max, tuned for opt."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    min: list[int] = Field(min_length=1)
    opt: list[int] = Field(min_length=1)
    max: list[int] = Field(min_length=1)

    @model_validator(mode="after")
    def _ordered(self) -> ShapeProfile:
        if not len(self.min) == len(self.opt) == len(self.max):
            raise ValueError("min, opt and max must have the same rank")
        if not all(a <= b <= c for a, b, c in zip(self.min, self.opt, self.max, strict=True)):
            raise ValueError(f"need min <= opt <= max in every dimension: {self.min}, "
                             f"{self.opt}, {self.max}")
        return self


class TensorRtOptions(BaseModel):
    """Options of the TensorRT backend (target profile `options:`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    precision: TrtPrecision = Field(
        TrtPrecision.FP16, description="fp32; fp16 (mixed precision ONNX, I/O and "
        "sensitive nodes FP32); int8 (needs a `quantize: {preset: tensorrt}` pass before).")
    calibration_dataset: DatasetRef | None = Field(
        None, description="fp16: recipe dataset run in FP32 to find nodes whose outputs "
        "exceed `fp16_data_max` (they stay FP32). Without it only the op and weight rules "
        "apply.")
    calibration_samples: int = Field(16, ge=1, description="Samples for the FP16 range check.")
    fp16_data_max: float = Field(512.0, gt=0, description="fp16: a node whose output "
                                 "exceeds this on the data stays FP32 (AutoCast's default).")
    fp16_keep_ops: list[str] = Field(default_factory=lambda: list(SENSITIVE_OPS),
                                     description="fp16: op types kept FP32.")
    fp16_keep_nodes: list[str] = Field(default_factory=list,
                                       description="fp16: node names kept FP32.")
    unsupported: Unsupported = Field(
        Unsupported.FAIL, description="A node the ONNX parser's support matrix does not "
        "list: `fail` names it at compile time; `report` only lists it (a plugin on the "
        "device must provide it).")
    sanitize: bool = Field(False, description="Run Polygraphy's `surgeon sanitize "
                           "--fold-constants` on the ONNX first (needs polygraphy).")
    # The device: an engine runs only with the TensorRT version and GPU it was built for,
    # so both enter the build stage's key and the device is checked against them.
    tensorrt_version: str = Field(
        "10.3", pattern=r"^\d+\.\d+$", description="TensorRT major.minor on the device "
        "(JetPack 6.1/6.2: 10.3); picks the parser matrix and is checked on the device.")
    compute_capability: str = Field(
        "8.7", pattern=r"^\d+\.\d+$", description="The device GPU's compute capability "
        "(Jetson Orin: 8.7); checked on the device.")
    typing: Typing = Field(Typing.STRONG, description="`strong`: types from the ONNX "
                           "(TensorRT 10 and 11); `weak`: TensorRT 10's FP16/INT8 builder "
                           "flags instead (removed in TensorRT 11).")
    workspace_mb: int = Field(1024, ge=16, description="Builder workspace memory pool limit.")
    optimization_level: int = Field(3, ge=0, le=5, description="Builder optimization level "
                                    "(TensorRT's default 3; 5 searches longest).")
    dla_core: int | None = Field(None, ge=0, le=1, description="Build for this DLA core "
                                 "(Orin NX/AGX; the Orin Nano has none), GPU fallback on.")
    profiles: dict[str, ShapeProfile] = Field(
        default_factory=dict, description="Optimization profile per dynamic input "
        "(min/opt/max shapes). Default: the recipe's declared shape for all three.")
    timing_cache_dir: str = Field(
        "~/.cache/edgebuild/tensorrt", description="On the device: where the timing cache "
        "persists between builds (one file per TensorRT version and GPU).")
    latency_tool: str = Field("python", pattern="^(python|trtexec)$", description="`python`: "
                              "time the engine with edgebuild's latency protocol; `trtexec`: "
                              "trtexec's own statistics.")
    layer_timing: bool = Field(False, description="Also record trtexec's per-layer "
                               "profile (--dumpProfile --exportProfile, a run of its own) as "
                               "the latency result's `profile`; needs `latency_tool: "
                               "trtexec`. `measure.profile: true` takes it too.")

    @model_validator(mode="after")
    def _consistent(self) -> TensorRtOptions:
        if self.layer_timing and self.latency_tool != "trtexec":
            raise ValueError("layer_timing needs `latency_tool: trtexec` (the per-layer "
                             "profile is trtexec's)")
        if self.typing is Typing.WEAK and self.tensorrt_version.split(".")[0] not in ("8", "9",
                                                                                        "10"):
            raise ValueError(f"typing weak needs TensorRT 10 or older; TensorRT "
                             f"{self.tensorrt_version} networks are strongly typed")
        return self


def input_profiles(options: TensorRtOptions, declared: list[dict[str, Any]],
                   dynamic: list[str], shape_profiles: dict[str, dict[str, list[int]]] | None = None
                   ) -> dict[str, ShapeProfile]:
    """A profile for every dynamic input: the options' own, else min/max over the recipe's
    shape profiles (edgebuild/core/shapes.py) and opt the declared example shape clamped
    into them; without `shapes:` min = opt = max = declared."""
    from edgebuild.core.shapes import bounds

    shapes = {t["name"]: list(t["shape"]) for t in declared}
    limits = bounds(shape_profiles or {"example": shapes})
    found = {}
    for name in dynamic:
        if name in options.profiles:
            found[name] = options.profiles[name]
        elif name in shapes:
            low, high = limits.get(name, (shapes[name], shapes[name]))
            opt = [min(max(d, a), b) for d, a, b in zip(shapes[name], low, high, strict=True)]
            found[name] = ShapeProfile(min=low, opt=opt, max=high)
    return found


def trtexec_command(options: TensorRtOptions, onnx_name: str,
                    profiles: dict[str, ShapeProfile]) -> list[str]:
    """The `trtexec` invocation that builds the same engine by hand on the device."""
    command = ["trtexec", f"--onnx={onnx_name}", "--saveEngine=model.engine",
               f"--memPoolSize=workspace:{options.workspace_mb}M",
               f"--builderOptimizationLevel={options.optimization_level}",
               "--timingCacheFile=timing.cache"]
    if options.typing is Typing.STRONG:
        command.append("--stronglyTyped")
    elif options.precision is TrtPrecision.FP16:
        command.append("--fp16")
    elif options.precision is TrtPrecision.INT8:
        command += ["--int8", "--fp16"]  # Q/DQ layers int8, the rest may pick fp16
    if profiles:
        def shapes(which: str) -> str:
            return ",".join(f"{name}:{'x'.join(str(d) for d in getattr(p, which))}"
                            for name, p in profiles.items())

        command += [f"--minShapes={shapes('min')}", f"--optShapes={shapes('opt')}",
                    f"--maxShapes={shapes('max')}"]
    if options.dla_core is not None:
        command += [f"--useDLACore={options.dla_core}", "--allowGPUFallback"]
    return command


def shell_line(command: list[str]) -> str:
    return " ".join(shlex.quote(part) for part in command)


__all__ = ["ShapeProfile", "TensorRtOptions", "TrtPrecision", "Typing", "Unsupported",
           "input_profiles", "shell_line", "trtexec_command"]
