"""import-onnx: bring a recipe's existing ONNX file into the cache as an artifact.

Its metadata carries the model's own (class names, task, stride, input size from the
file's `metadata_props`, passes/onnx_metadata.py), which the report shows per target."""

from __future__ import annotations

import shutil
from typing import Any, ClassVar

from edgebuild.core.op import Op, OpResult, StageContext
from edgebuild.passes.onnx_metadata import read_metadata
from edgebuild.passes.onnx_stats import graph_stats
from edgebuild.recipe.files import resolve_file
from edgebuild.recipe.models import ModelSource


class ImportOnnx(Op):
    name = "import-onnx"
    version = 2  # 2: the model's own metadata
    accepts = ("onnx-file",)
    produces = "onnx"
    tools: ClassVar[tuple[str, ...]] = ("onnx",)
    summary = "check and copy the recipe's ONNX file"

    def run(self, ctx: StageContext, params: Any) -> OpResult:
        import onnx

        source = ModelSource.model_validate(ctx.model_source)
        assert source.onnx is not None
        path = resolve_file(source.onnx, ctx.recipe_dir)
        onnx.checker.check_model(str(path))
        shutil.copyfile(path, ctx.out / "model.onnx")
        metadata: dict[str, Any] = {"graph": graph_stats(ctx.out / "model.onnx")}
        model = onnx.load(str(ctx.out / "model.onnx"), load_external_data=False)
        own = read_metadata({p.key: p.value for p in model.metadata_props})
        if not own.empty:
            metadata["model"] = own.model_dump(exclude_defaults=True)
        return OpResult(main="model.onnx", format="onnx", metadata=metadata)
