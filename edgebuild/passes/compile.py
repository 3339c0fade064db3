"""compile: hand the model to the target's backend (target-specific stage)."""

from __future__ import annotations

from typing import Any

from edgebuild.passes.base import Op, OpResult, StageContext, TargetInfo
from edgebuild.registry import backend_tools, load_backend


class Compile(Op):
    name = "compile"
    version = 1
    accepts = ("onnx", "pytorch")
    target_specific = True
    summary = "the target backend's compiler"

    def tool_names(self, target: TargetInfo | None) -> tuple[str, ...]:
        assert target is not None
        return backend_tools(target.backend)

    def run(self, ctx: StageContext, params: Any) -> OpResult:
        assert ctx.target is not None
        backend = load_backend(ctx.target.backend)
        result = backend.compile(ctx.input(), ctx.target, ctx.out)
        result.metadata.setdefault("backend", backend.name)
        return result
