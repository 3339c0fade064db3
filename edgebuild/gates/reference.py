"""reference: FP32 outputs of the original model on a dataset, computed once and cached.

For a PyTorch model the reference is PyTorch itself (not the exported ONNX),
so an export bug shows up as disagreement instead of being baked into the
reference. For an ONNX model it is ONNX Runtime with optimizations disabled.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict, TypeAdapter

from edgebuild.errors import DataError
from edgebuild.passes.base import Op, OpResult, StageContext
from edgebuild.recipe.datasets import DatasetSpec

if TYPE_CHECKING:
    import numpy as np

    from edgebuild.data.loaders import Samples


class DatasetParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    dataset: str


def load_stage_dataset(ctx: StageContext, name: str) -> Samples:
    from edgebuild.data.loaders import load_dataset

    parsed: DatasetSpec = TypeAdapter(DatasetSpec).validate_python(ctx.recipe["datasets"][name])
    samples = load_dataset(parsed, ctx.recipe_dir, [t["name"] for t in ctx.recipe["inputs"]], name)
    check_matches_inputs(samples, ctx.recipe["inputs"], name)
    return samples


def check_matches_inputs(samples: Samples, tensors: list[dict[str, Any]], name: str) -> None:
    """A DataError naming the dataset and input when a sample cannot feed the model."""
    declared = {t["name"]: t for t in tensors}
    for input_name, array in samples.inputs.items():
        if input_name not in declared:
            raise DataError(f"dataset '{name}' feeds '{input_name}', which is not a model input",
                            f"model inputs: {', '.join(declared)}")
        tensor = declared[input_name]
        want = list(tensor["shape"])
        got = [1, *array.shape[1:]]  # one sample, batch of 1
        dynamic = {int(k) for k in tensor["dynamic_axes"]}
        same_rank = len(got) == len(want)
        if not same_rank or any(g != w for i, (g, w) in enumerate(zip(got, want, strict=False))
                                if i not in dynamic and i != 0):
            hint = ("the channel order looks swapped: set preprocess.layout"
                    if same_rank and sorted(got) == sorted(want) else
                    "check the dataset's preprocessing (resize, crop, layout)")
            raise DataError(f"dataset '{name}' gives input '{input_name}' samples of shape "
                            f"{got}, the model declares {want}", hint)
        if str(array.dtype) != tensor["dtype"]:
            raise DataError(f"dataset '{name}' gives input '{input_name}' dtype {array.dtype}, "
                            f"the model declares {tensor['dtype']}")


def save_outputs(path: Path, outputs: list[dict[str, np.ndarray]], samples: Samples) -> None:
    import numpy as np

    names = list(outputs[0])
    arrays = {f"output:{n}": np.concatenate([o[n] for o in outputs]) for n in names}
    if samples.labels is not None:
        arrays["labels"] = np.asarray(samples.labels)
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
        samples = load_stage_dataset(ctx, params.dataset)
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

            from edgebuild.passes.torch_model import build_torch_model

            model = build_torch_model(ctx.recipe["model"], ctx.recipe_dir)
            names = ctx.recipe["outputs"]
            with torch.no_grad():
                for i in range(len(samples)):
                    result = model(*(torch.from_numpy(v) for v in samples.feed(i).values()))
                    result = [result] if isinstance(result, torch.Tensor) else list(result)
                    outputs.append({n: r.numpy() for n, r in zip(names, result, strict=False)})
        save_outputs(ctx.out / "outputs.npz", outputs, samples)
        return OpResult(main="outputs.npz", format="outputs",
                        metadata={"samples": len(samples), "dataset": params.dataset})
