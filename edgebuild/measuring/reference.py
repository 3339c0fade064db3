"""reference: FP32 outputs of the original model on a dataset, computed once and cached.

For a PyTorch model the reference is PyTorch itself (not the exported ONNX),
so an export bug shows up as disagreement instead of being baked into the
reference. For an ONNX model it is ONNX Runtime with optimizations disabled.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict

from edgebuild.core.datasets import DatasetRef
from edgebuild.core.op import Op, OpResult, StageContext
from edgebuild.fidelity.outputs import save_outputs

if TYPE_CHECKING:
    import numpy as np


class DatasetParams(BaseModel):
    """Params of a stage that reads one dataset."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    dataset: DatasetRef


class Reference(Op):
    name = "reference"
    version = 2  # 2: BATCH samples a call where the model takes a batch axis
    Params = DatasetParams
    accepts = ("pytorch", "onnx")
    produces = "outputs"
    tools: ClassVar[tuple[str, ...]] = ("torch", "onnxruntime", "numpy", "pillow")
    summary = "FP32 reference outputs of the source model"

    def run(self, ctx: StageContext, params: Any) -> OpResult:
        from edgebuild.data.stream import evaluate, evaluate_batched, stream_summary

        samples = ctx.dataset(params.dataset)
        # Batched where every input declares a dynamic axis 0 (checked on the first batch).
        batch_axis = not ctx.io.state and all(
            0 in {int(a) for a in (t.get("dynamic_axes") or {})} for t in ctx.io.inputs)

        def run(infer: Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]]
                ) -> list[dict[str, np.ndarray]]:
            if batch_axis:
                return evaluate_batched(samples, infer, batch_axis)
            return evaluate(samples, ctx.io.state, infer)
        if "model" in ctx.inputs:  # an ONNX source
            import onnxruntime as ort

            so = ort.SessionOptions()
            so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
            session = ort.InferenceSession(str(ctx.input().main), so,
                                           providers=["CPUExecutionProvider"])
            names = [o.name for o in session.get_outputs()]

            def infer(feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
                return dict(zip(names, session.run(names, feeds), strict=True))

            outputs = run(infer)
        else:
            import torch

            from edgebuild.frontend.torch_model import build_torch_model

            model = build_torch_model(ctx.model_source, ctx.recipe_dir)

            def infer(feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
                result = model(*(torch.from_numpy(v) for v in feeds.values()))
                result = [result] if isinstance(result, torch.Tensor) else list(result)
                return {n: r.numpy() for n, r in zip(ctx.io.outputs, result, strict=False)}

            with torch.no_grad():
                outputs = run(infer)
        save_outputs(ctx.out / "outputs.npz", outputs, samples,
                     {p["output"] for p in ctx.io.state})
        return OpResult(main="outputs.npz", format="outputs",
                        metadata={**stream_summary(samples, outputs),
                                  "dataset": params.dataset})
