"""Compile = let ONNX Runtime optimize the graph for the target and save the result.

Levels `disable`, `basic` and `extended` produce graphs any ONNX Runtime build
runs; `all` adds layout transforms specific to the build machine's CPU, so it
is only valid when the target *is* this machine (docs/backends.md).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from edgebuild.backends.base import Backend, Runner
from edgebuild.backends.declaration import Capabilities
from edgebuild.backends.onnxruntime.options import GraphLevel, OrtOptions
from edgebuild.backends.onnxruntime.runner import OrtRunner, session_options
from edgebuild.core.op import OpResult, StageContext
from edgebuild.core.target import Target

if TYPE_CHECKING:
    import numpy as np

    from edgebuild.core.artifact import Artifact
    from edgebuild.measure.record import OpProfile


_INSERTED = re.compile(r"^(?P<op>[A-Za-z]+)(?:_token_\d+)?$")


def name_inserted_nodes(path: Path) -> None:
    """Name the nodes ONNX Runtime's optimizer inserts by their place in the graph.

    Its layout transformer names them `ReorderOutput`, `ReorderOutput_token_4`, … in an
    order that varies between runs of the same session (seen: two ReorderOutput nodes
    swapping names between a local and a cluster build), so the saved model — and the
    stage's digest — would not be a function of its key. A node named after its own op
    type (plus ORT's `_token_N`) becomes `<op>_ort_<k>`, k counting in graph order.
    """
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    counts: dict[str, int] = {}
    changed = False
    for node in model.graph.node:
        match = _INSERTED.match(node.name)
        if match is None or match["op"] != node.op_type:
            continue
        k = counts.get(node.op_type, 0)
        counts[node.op_type] = k + 1
        node.name = f"{node.op_type}_ort_{k}"
        changed = True
    if changed:
        onnx.save(model, str(path))


class OnnxRuntimeBackend(Backend[OrtOptions]):
    name = "onnxruntime"
    summary = "ONNX Runtime (CPU execution provider)"
    # onnx-ort: ONNX with ONNX Runtime's com.microsoft fused ops (ort-transformer-optimize)
    accepts = ("onnx", "onnx-ort")
    produces = "onnx"
    tools: ClassVar[tuple[str, ...]] = ("onnxruntime", "onnx")
    version = 2  # 2: ORT-inserted nodes named by their place (a deterministic digest)
    capabilities = Capabilities(measures_memory=True)

    def compile(self, ctx: StageContext, target: Target) -> OpResult:
        import onnxruntime as ort

        from edgebuild.customops.ort import save_optimized
        from edgebuild.passes.onnx_stats import graph_stats

        options = self.options(target)
        unknown = set(options.execution_providers) - set(ort.get_available_providers())
        if unknown:
            from edgebuild.errors import BackendUnavailable

            raise BackendUnavailable(
                "onnxruntime", f"execution providers {sorted(unknown)} are not in this build "
                f"(available: {ort.get_available_providers()})",
            )
        so = session_options(options, threads=1)
        model = ctx.input()
        destination = ctx.out / "model.onnx"
        if options.graph_optimization_level is GraphLevel.DISABLE:
            shutil.copyfile(model.main, destination)
        else:
            # With the custom ops' kernels: ONNX Runtime refuses a node it has none for.
            save_optimized(so, model.main, destination, options.execution_providers)
            name_inserted_nodes(destination)
        return OpResult(
            main="model.onnx", format="onnx",
            metadata={
                "graph_optimization_level": options.graph_optimization_level.value,
                "before": graph_stats(model.main), "after": graph_stats(destination),
            },
        )

    def runner(self, artifact: Artifact, target: Target, threads: int | None) -> Runner:
        return OrtRunner(artifact.main, self.options(target), threads)

    def op_profile(self, artifact: Artifact, target: Target, threads: int | None,
                   feeds: dict[str, np.ndarray], shapes: dict[str, list[int]],
                   runs: int) -> OpProfile | None:
        from edgebuild.backends.onnxruntime.profile import op_profile

        return op_profile(artifact.main, self.options(target), threads,
                          feeds, runs)
