"""compile: hand the model to the target's backend (target-specific stage)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from edgebuild.passes.base import Op, OpResult, StageContext, TargetInfo
from edgebuild.registry import backend_tools, load_backend


class CompileParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    calibration: str | None = Field(
        None, description="Dataset for backends that quantize while converting; set by the "
        "planner from the target's `calibration_dataset` backend option.")


class Compile(Op):
    name = "compile"
    version = 2
    Params = CompileParams
    accepts = ("onnx", "pytorch")
    target_specific = True
    summary = "the target backend's compiler"
    dataset_fields = ("calibration",)

    def tool_names(self, target: TargetInfo | None) -> tuple[str, ...]:
        assert target is not None
        return backend_tools(target.backend)

    def run(self, ctx: StageContext, params: Any) -> OpResult:
        assert ctx.target is not None
        backend = load_backend(ctx.target.backend)
        calibration = ctx.dataset(params.calibration) if params.calibration else None
        result = backend.compile(ctx.input(), ctx.target, ctx.out, calibration)
        result.metadata.setdefault("backend", backend.name)
        return result
