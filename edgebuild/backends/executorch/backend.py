"""PyTorch ExecuTorch: PyTorch -> .pte (XNNPACK fp32 / PT2E int8) for Android phones.

    PyTorch ─ torch.export ─ [PT2E int8, calibrated] ─ to_edge_transform_and_lower
            (XnnpackPartitioner) ─ to_executorch ─▶ model.pte
              + executorch_delegation.md (per op: XNNPACK or portable kernels)

ExecuTorch converts from PyTorch, so its targets skip the recipe's ONNX passes
(`inherit_passes: false`), as Core ML's do. Accuracy runs the .pte here in
ExecuTorch's own runtime (its Python bindings: the same program, and XNNPACK's
kernels built for this CPU); latency runs here too (`latency_on: host`, labelled
as host figures, as the TFLite android targets are), and `measure.profile` adds
the runtime's per-operator profile (ETDump: profile.py) — timing it on the phone is
not implemented yet, so `latency_on: device` is "not measurable here".
"""

from __future__ import annotations

import platform
import time
from typing import TYPE_CHECKING, Any, ClassVar

from edgebuild.backends.base import Backend, Runner
from edgebuild.backends.declaration import Capabilities
from edgebuild.backends.executorch.options import (
    Delegate,
    ExecutorchOptions,
    LatencyOn,
    Precision,
)
from edgebuild.core.op import OpResult, StageContext
from edgebuild.core.target import Target

if TYPE_CHECKING:
    import numpy as np

    from edgebuild.core.artifact import Artifact
    from edgebuild.measure.record import OpProfile

PROGRAM = "model.pte"
DEVICE_LATENCY = ("not measurable here: timing a .pte on the phone (ExecuTorch's "
                  "executor_runner over adb) is not implemented yet; `latency_on: host` times "
                  "this machine's ExecuTorch runtime instead, labelled a host figure")


class ExecutorchBackend(Backend[ExecutorchOptions]):
    name = "executorch"
    summary = "PyTorch ExecuTorch .pte, XNNPACK fp32/int8 (host runtime here; phones: device)"
    accepts = ("pytorch",)
    produces = "pte"
    tools: ClassVar[tuple[str, ...]] = ("executorch", "torch", "torchao")
    version = 2  # 2: int8 fuses ReLU6 into the conv's range, bias correction
    extra = "executorch"
    runner_metadata: ClassVar[tuple[str, ...]] = ("io",)
    # torch.export refuses the in-graph NMS's Python loop (data-dependent control flow).
    capabilities = Capabilities(measures_memory=True, converts_nms=False)

    def compile(self, ctx: StageContext, target: Target) -> OpResult:
        from edgebuild.backends.executorch import coverage, lower
        from edgebuild.passes.torch_capture import example_inputs
        from edgebuild.passes.torch_model import load_stage_model

        options = self.options(target)
        tensors, outputs = ctx.io.inputs, ctx.io.outputs
        started = time.perf_counter()
        model = load_stage_model(ctx)
        inputs = example_inputs(tensors)  # static: a .pte is memory-planned at these shapes
        calibration = (ctx.dataset(options.calibration_dataset)
                       if options.calibration_dataset is not None else None)
        names = [t["name"] for t in tensors]
        program, edge, seconds, quantized = lower.build(model, inputs, options, calibration,
                                                        names)
        (ctx.out / PROGRAM).write_bytes(program)
        with lower.needs_executorch():
            rows, subgraphs = coverage.coverage(edge)
        title = f"{options.precision.value}, delegate {options.delegate.value}"
        (ctx.out / coverage.NOTE).write_text(
            coverage.render_markdown(rows, subgraphs, options.delegate.value, title))
        io = {"inputs": [{"name": t["name"], "shape": [int(d) for d in x.shape],
                          "dtype": t["dtype"]} for t, x in zip(tensors, inputs, strict=True)],
              "outputs": list(outputs)}
        used = (min(len(calibration), options.calibration_samples)
                if calibration is not None and options.precision is Precision.INT8 else 0)
        return OpResult(main=PROGRAM, format=self.produces, metadata={
            "precision": options.precision.value, "delegate": options.delegate.value,
            "io": io, "calibration_samples": used, "program_bytes": len(program),
            "delegation": coverage.summary(rows, subgraphs, options.delegate.value),
            "kept_float": _kept_float(options), "quantization": quantized or None,
            "notes": [coverage.NOTE], "ships": [PROGRAM],
            **seconds,
            "compile_seconds": round(time.perf_counter() - started, 2)})

    def runner(self, artifact: Artifact, target: Target, threads: int | None) -> Runner:
        from edgebuild.backends.executorch.runner import ExecutorchRunner

        return ExecutorchRunner(artifact.main, artifact.metadata["io"], threads)

    def op_profile(self, artifact: Artifact, target: Target, threads: int | None,
                   feeds: dict[str, np.ndarray], shapes: dict[str, list[int]],
                   runs: int) -> OpProfile | None:
        """ExecuTorch's ETDump of the .pte on this host, read by its Inspector
        (profile.py): XNNPACK's own operators, each with the kernel it ran."""
        from edgebuild.backends.executorch.profile import op_profile
        from edgebuild.measure.record import OpProfile

        if self.options(target).latency_on is LatencyOn.DEVICE:
            return OpProfile(unmeasurable=DEVICE_LATENCY)
        return op_profile(artifact.main, artifact.metadata["io"], threads, feeds, runs)

    def memory_measurable(self, target: Target) -> bool:
        """The runtime runs in the measuring process on the host; a phone's is its own."""
        return self.options(target).latency_on is LatencyOn.HOST

    def _probe(self, target: Target, purpose: str) -> str | None:
        return self.unmeasurable_reason(target, purpose) if purpose == "latency" else None

    def unmeasurable_reason(self, target: Target, purpose: str = "latency") -> str:
        if purpose == "latency" and self.options(target).latency_on is LatencyOn.DEVICE:
            return DEVICE_LATENCY
        return ""  # accuracy, and host latency: ExecuTorch's runtime runs here

    def where(self, target: Target, purpose: str = "latency") -> str:
        options = self.options(target)
        kernels = ("XNNPACK delegate" if options.delegate is Delegate.XNNPACK
                   else "portable kernels")
        if purpose == "accuracy":
            return (f"host: {platform.machine()} ExecuTorch runtime, {kernels} (the same .pte "
                    "the phone runs)")
        return (f"host: {platform.machine()} ExecuTorch runtime, {kernels} — a host figure, "
                "not the phone's")


def _kept_float(options: ExecutorchOptions) -> dict[str, Any] | None:
    """What stayed float in this build, and what of the shared INT8 rules (quant/safety.py)
    it does not do."""
    if options.precision is not Precision.INT8:
        return None
    kept = ([f"kept fp32 in XNNPACK (keep_float): {', '.join(options.keep_float)}"]
            if options.keep_float else [])
    return {"nodes": list(options.keep_float), "applies": False, "notes": [*kept,
        "PT2E with XNNPACKQuantizer quantizes every op it annotates but those: the INT8 "
        "rules' automatic float nodes (mixed-range Concat/Add, output tail, signal front "
        "end) are not applied to this path yet (bias correction is: `bias_correction`)"]}
