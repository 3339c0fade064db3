"""compile: hand the model to the target's backend (target-specific stage)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from edgebuild.core.op import Op, OpResult, StageContext
from edgebuild.core.target import Target
from edgebuild.registry import backend_tools, load_backend


class Compile(Op):
    name = "compile"
    version = 3
    accepts = ("*",)  # the planner checks the chain against the backend's own `accepts`
    target_specific = True
    summary = "the target backend's compiler"
    probes = "compile"  # Backend.compile_probe: a backend not installable by default

    def tool_names(self, target: Target | None) -> tuple[str, ...]:
        assert target is not None
        return backend_tools(target.backend)

    def datasets(self, params: BaseModel, target: Target | None) -> tuple[str, ...]:
        """What the backend's options name (TFLite's calibration set, say)."""
        assert target is not None
        return load_backend(target.backend).datasets(target)

    def run(self, ctx: StageContext, params: Any) -> OpResult:
        assert ctx.target is not None
        backend = load_backend(ctx.target.backend)
        result = backend.compile(ctx, ctx.target)
        result.metadata.setdefault("backend", backend.name)
        return result
