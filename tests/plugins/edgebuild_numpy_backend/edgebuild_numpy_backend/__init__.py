"""ONNX's reference runtime (`onnx.reference.ReferenceEvaluator`, pure Python and numpy)
as an edgebuild backend, and a pass that rounds float weights.

Written only against edgebuild's public extension points: the `Backend`/`Runner`
classes with their typed `Placement` and `Capabilities`, the `Op` interface,
`DatasetRef`, and two entry points in pyproject.toml.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from edgebuild.backends.base import Backend, Runner, TensorMeta
from edgebuild.backends.declaration import Capabilities, Placement, Where
from edgebuild.core.artifact import Artifact
from edgebuild.core.datasets import DatasetRef
from edgebuild.core.op import Op, OpResult, StageContext
from edgebuild.core.target import Target
from edgebuild.errors import StageError


class NumpyReferenceOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    check_dataset: DatasetRef | None = Field(
        None, description="At compile, run this many samples of a recipe dataset through "
        "both the reference runtime and ONNX Runtime and record their largest difference.")
    check_samples: int = Field(4, ge=1, le=64, description="Samples of `check_dataset`.")


class NumpyReferenceBackend(Backend[NumpyReferenceOptions]):
    name = "numpy-reference"
    summary = "ONNX's pure-Python reference runtime (onnx.reference), a plugin"
    accepts = ("onnx",)
    produces = "onnx-reference"
    tools: ClassVar[tuple[str, ...]] = ("onnx", "numpy")
    version = 1
    # The defaults, spelled out: compile here, accuracy (and latency) on the target's
    # device; no memory figure, and a graph ending in NMS runs as written.
    placement = Placement(compile=Where.HOST, device_build=False, accuracy=Where.DEVICE)
    capabilities = Capabilities(measures_memory=False, converts_nms=True)

    def compile(self, ctx: StageContext, target: Target) -> OpResult:
        import onnx

        options = self.options(target)
        source = ctx.input().main
        try:
            onnx.checker.check_model(str(source), full_check=True)
        except onnx.checker.ValidationError as exc:
            raise StageError(f"the ONNX model does not pass onnx.checker: {exc}") from None
        shutil.copyfile(source, ctx.out / "model.onnx")
        metadata: dict[str, Any] = {"runtime": f"onnx.reference {onnx.__version__}"}
        if options.check_dataset is not None:
            metadata["check"] = _against_onnxruntime(ctx.out / "model.onnx",
                                                     ctx.dataset(options.check_dataset),
                                                     options.check_samples)
        return OpResult(main="model.onnx", format=self.produces, metadata=metadata)

    def runner(self, artifact: Artifact, target: Target, threads: int | None) -> Runner:
        return ReferenceRunner(artifact.main)


def _against_onnxruntime(model: Path, samples: Any, count: int) -> dict[str, float]:
    """The largest output difference between the two runtimes on the first samples."""
    import numpy as np
    import onnxruntime as ort
    from onnx.reference import ReferenceEvaluator

    reference = ReferenceEvaluator(str(model))
    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    worst = 0.0
    for i in range(min(count, len(samples))):
        feeds = samples.feed(i)
        for a, b in zip(reference.run(None, feeds), session.run(None, feeds), strict=True):
            worst = max(worst, float(np.max(np.abs(np.asarray(a) - np.asarray(b)))))
    return {"samples": float(min(count, len(samples))), "max_abs_vs_onnxruntime": worst}


class ReferenceRunner(Runner):
    _TYPES: ClassVar[dict[int, str]] = {1: "float32", 10: "float16", 7: "int64", 6: "int32"}

    def __init__(self, model: Path) -> None:
        super().__init__()
        self.model = model
        self._evaluator: Any = None
        self._inputs: Any = None
        self._outputs: list[str] = []

    def _activate(self) -> None:
        import onnx
        from onnx.reference import ReferenceEvaluator

        proto = onnx.load(str(self.model))
        self._inputs = list(proto.graph.input)
        self._outputs = [o.name for o in proto.graph.output]
        self._evaluator = ReferenceEvaluator(proto)

    def _input_metadata(self) -> TensorMeta:
        meta: TensorMeta = {}
        for value in self._inputs:
            tensor = value.type.tensor_type
            shape = tuple(d.dim_value if d.dim_value > 0 else (d.dim_param or "?")
                          for d in tensor.shape.dim)
            meta[value.name] = (shape, self._TYPES.get(tensor.elem_type, "float32"))
        return meta

    def _infer(self, feeds: dict[str, Any]) -> dict[str, Any]:
        return dict(zip(self._outputs, self._evaluator.run(None, feeds), strict=True))

    def _deactivate(self) -> None:
        self._evaluator = None


class RoundParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    decimals: int = Field(3, ge=0, le=8, description="Decimals kept in float weights.")


class RoundWeights(Op):
    """Rounds every float initializer: a crude, visible precision cut, to show a pass."""

    name = "round-weights"
    version = 1
    Params = RoundParams
    accepts = ("onnx",)
    produces = "onnx"
    tools: ClassVar[tuple[str, ...]] = ("onnx", "numpy")
    summary = "round float ONNX weights to N decimals (a plugin pass)"

    def run(self, ctx: StageContext, params: Any) -> OpResult:
        import numpy as np
        import onnx
        from onnx import numpy_helper

        model = onnx.load(str(ctx.input().main))
        changed = 0
        for index, tensor in enumerate(model.graph.initializer):
            array = numpy_helper.to_array(tensor)
            if array.dtype.kind == "f":
                rounded = np.round(array, params.decimals).astype(array.dtype)
                changed += int(np.count_nonzero(rounded != array))
                model.graph.initializer[index].CopyFrom(
                    numpy_helper.from_array(rounded, tensor.name))
        onnx.save(model, str(ctx.out / "model.onnx"))
        return OpResult(main="model.onnx", format="onnx",
                        metadata={"decimals": params.decimals, "values_changed": changed})
