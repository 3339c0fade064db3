"""device-build: the second half of a backend that compiles here and builds on the device.

The planner adds it after `compile` for a backend whose `placement.device_build` is
set (TensorRT: the engine from the TensorRT-ready ONNX), placed on the target's device
(`Stage.runs_on`) like a measurement. What it does is the backend's `build_on_device`.
"""

from __future__ import annotations

from typing import Any

from edgebuild.core.op import Op, OpResult, StageContext
from edgebuild.core.target import Target
from edgebuild.registry import backend_tools, load_backend


class DeviceBuild(Op):
    name = "device-build"
    version = 1
    accepts = ("*",)
    produces = "device-artifact"
    target_specific = True
    probes = "build"
    summary = "build the device's own artifact from the compiled one, on the device"

    def tool_names(self, target: Target | None) -> tuple[str, ...]:
        assert target is not None
        return backend_tools(target.backend)

    def run(self, ctx: StageContext, params: Any) -> OpResult:
        assert ctx.target is not None
        return load_backend(ctx.target.backend).build_on_device(ctx, ctx.target)
