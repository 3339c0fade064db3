"""onnx-optimize: portable graph clean-up every backend can consume.

Order: shape inference, then onnxslim/onnxsim (constant folding, dead-code and
identity removal, fusion of shape arithmetic), then ONNX Runtime's *basic*
level, which only makes standard-ONNX rewrites. Higher ORT levels insert
`com.microsoft` ops that OpenVINO, TensorRT or TFLite cannot read; those belong
to the ONNX Runtime backend's compile step.
"""

from __future__ import annotations

import shutil
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from edgebuild.core.op import Op, OpResult, StageContext
from edgebuild.errors import BackendUnavailable
from edgebuild.passes.onnx_stats import graph_stats


class OptimizeParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    simplifier: Literal["onnxslim", "onnxsim", "none"] = Field(
        "onnxslim", description="Graph simplifier (constant folding and clean-up)."
    )
    ort_basic: bool = Field(True, description="Apply ONNX Runtime's portable basic level.")


class OnnxOptimize(Op):
    name = "onnx-optimize"
    version = 2  # 2: custom nodes (schemas registered, ORT basic level with their kernels)
    Params = OptimizeParams
    accepts = ("onnx",)
    produces = "onnx"
    tools: ClassVar[tuple[str, ...]] = ("onnx", "onnxslim", "onnxruntime")
    summary = "shape inference, constant folding, simplification, portable ORT optimization"

    def run(self, ctx: StageContext, params: Any) -> OpResult:
        import onnx

        from edgebuild.customops import onnx_schema
        from edgebuild.customops.declared import active
        from edgebuild.customops.ort import custom_nodes, missing_kernels, save_optimized

        p: OptimizeParams = params
        source = ctx.input().main
        work = ctx.out / "work.onnx"
        # Their schemas let shape inference and the checker read the custom nodes.
        onnx_schema.register(active().ops)
        loaded = onnx.load(str(source))
        custom = sorted(custom_nodes(loaded))
        model = onnx.shape_inference.infer_shapes(loaded)
        if p.simplifier == "onnxslim":
            import onnxslim

            model = onnxslim.slim(model)
        elif p.simplifier == "onnxsim":
            try:
                import onnxsim
            except ImportError as exc:
                raise BackendUnavailable("onnxsim", "onnxsim is not installed") from exc
            model, ok = onnxsim.simplify(model)
            if not ok:
                raise RuntimeError("onnxsim could not validate the simplified model")
        onnx.save(model, str(work))
        destination = ctx.out / "model.onnx"
        # ONNX Runtime loads a custom node only with its kernel: without one, the basic
        # level (a portable clean-up) is left out rather than failing the build.
        skipped = missing_kernels(model) if p.ort_basic else []
        if p.ort_basic and not skipped:
            import onnxruntime as ort

            so = ort.SessionOptions()
            so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
            save_optimized(so, work, destination)
            work.unlink()
        else:
            shutil.move(work, destination)
        onnx.checker.check_model(str(destination))
        notes: dict[str, Any] = {"custom_ops": custom} if custom else {}
        if skipped:
            notes["ort_basic_skipped"] = f"no ONNX Runtime kernel for {', '.join(skipped)}"
        return OpResult(main="model.onnx", format="onnx",
                        metadata={"before": graph_stats(source),
                                  "after": graph_stats(destination), **notes})
