"""reference: FP32 outputs of the original model on a dataset, computed once and cached.

For a PyTorch model the reference is PyTorch itself (not the exported ONNX),
so an export bug shows up as disagreement instead of being baked into the
reference. For an ONNX model it is ONNX Runtime with optimizations disabled.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict

from edgebuild.core.datasets import DatasetRef
from edgebuild.core.op import Op, OpResult, StageContext

if TYPE_CHECKING:
    import numpy as np

    from edgebuild.data.loaders import Samples


class DatasetParams(BaseModel):
    """Params of a stage that reads one dataset."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    dataset: DatasetRef


def save_outputs(path: Path, outputs: list[dict[str, np.ndarray]], samples: Samples) -> None:
    import numpy as np

    names = list(outputs[0])
    arrays = {f"output:{n}": np.concatenate([o[n] for o in outputs]) for n in names}
    if samples.labels is not None:
        arrays["labels"] = np.asarray(samples.labels)
    if samples.boxes is not None:  # ragged: all boxes in one array, and a count per sample
        arrays["truth:boxes"] = np.concatenate([b.boxes for b in samples.boxes]
                                               ).reshape(-1, 4).astype(np.float64)
        arrays["truth:classes"] = np.concatenate([b.classes for b in samples.boxes]
                                                 ).astype(np.int64)
        arrays["truth:counts"] = np.array([len(b.classes) for b in samples.boxes],
                                          dtype=np.int64)
    np.savez(path, **arrays)  # type: ignore[arg-type]


class Reference(Op):
    name = "reference"
    version = 1
    Params = DatasetParams
    accepts = ("pytorch", "onnx")
    produces = "outputs"
    tools: ClassVar[tuple[str, ...]] = ("torch", "onnxruntime", "numpy", "pillow")
    summary = "FP32 reference outputs of the source model"

    def run(self, ctx: StageContext, params: Any) -> OpResult:
        samples = ctx.dataset(params.dataset)
        outputs: list[dict[str, np.ndarray]] = []
        if "model" in ctx.inputs:  # an ONNX source
            import onnxruntime as ort

            so = ort.SessionOptions()
            so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
            session = ort.InferenceSession(str(ctx.input().main), so,
                                           providers=["CPUExecutionProvider"])
            names = [o.name for o in session.get_outputs()]
            for i in range(len(samples)):
                outputs.append(dict(zip(names, session.run(names, samples.feed(i)),
                                        strict=True)))
        else:
            import torch

            from edgebuild.frontend.torch_model import build_torch_model

            model = build_torch_model(ctx.model_source, ctx.recipe_dir)
            names = ctx.io.outputs
            with torch.no_grad():
                for i in range(len(samples)):
                    result = model(*(torch.from_numpy(v) for v in samples.feed(i).values()))
                    result = [result] if isinstance(result, torch.Tensor) else list(result)
                    outputs.append({n: r.numpy() for n, r in zip(names, result, strict=False)})
        save_outputs(ctx.out / "outputs.npz", outputs, samples)
        return OpResult(main="outputs.npz", format="outputs",
                        metadata={"samples": len(samples), "dataset": params.dataset})
