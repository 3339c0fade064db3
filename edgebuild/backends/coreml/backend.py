"""Apple Core ML: PyTorch -> .mlpackage (mlprogram) with coremltools, checked here as
far as Linux allows.

    PyTorch ─ capture (export | script | trace, checked against eager) ─ ct.convert
            ─ weight compression (int8 | palettize) ─▶ model.mlpackage
              + coreml_program.md (op list, precision, Neural Engine estimate)
              + proxy/ (the same compression in PyTorch: the accuracy proxy)

Core ML runs only on Apple's OSes: on Linux there is no runtime and no MIL
interpreter. So accuracy here is a *weight-compression proxy* (proxy.py), labelled
as such, and latency is "not measurable here: needs macOS". On a Mac (a `macos`
target, or a Dask worker there holding the target's resource) the runner is
Core ML itself, `MLModel.predict`.
"""

from __future__ import annotations

import platform
import time
from typing import TYPE_CHECKING, Any, ClassVar

from edgebuild.backends.base import Backend, Runner
from edgebuild.backends.coreml.options import CoreMlOptions
from edgebuild.backends.declaration import Capabilities
from edgebuild.core.op import OpResult, StageContext
from edgebuild.core.target import Target
from edgebuild.passes.torch_capture import Capture

if TYPE_CHECKING:
    import numpy as np

    from edgebuild.core.artifact import Artifact
    from edgebuild.measure.record import OpProfile

PACKAGE = "model.mlpackage"
PROGRAM_NOTE = "coreml_program.md"


def on_macos() -> bool:
    return platform.system() == "Darwin"


class CoreMlBackend(Backend[CoreMlOptions]):
    name = "coreml"
    summary = "Apple Core ML .mlpackage via coremltools (accuracy proxy here; Mac to run)"
    accepts = ("pytorch",)
    produces = "mlpackage"
    tools: ClassVar[tuple[str, ...]] = ("coremltools", "torch", "scikit-learn")
    # 3: metadata `kept_float` (the INT8 rules do not apply to weight-only compression)
    # 4: options int8_mode, granularity / block_size, keep_float (proxy and package)
    # 5: a traced fp16 proxy emulates fp16 in fp32 (proxy.fp16_emulated): 20× faster
    version = 5  # 2: a TorchScript capture converts at the target's shape profiles
    extra = "coreml"
    runner_metadata: ClassVar[tuple[str, ...]] = ("io", "proxy")
    # The in-graph NMS is a Python loop: torch.export refuses it, a trace freezes the
    # boxes its example kept (random check inputs keep none, so the capture check cannot
    # see it), and Core ML's own NMS is a separate pipeline model, not built here.
    # `measure.profile` off a Mac: the record says the compute plan needs macOS (plan.py)
    capabilities = Capabilities(converts_nms=False, profiles_without_latency=True)

    def compile(self, ctx: StageContext, target: Target) -> OpResult:
        from edgebuild.backends.coreml import program
        from edgebuild.backends.coreml.convert import (
            compress,
            convert,
            float_weight_consts,
            save,
        )
        from edgebuild.backends.coreml.proxy import (
            PROXY_DIR,
            compress_like_coreml,
            float_modules,
            save_proxy,
        )
        from edgebuild.core.shapes import io_profiles
        from edgebuild.passes.torch_capture import capture, check_capture
        from edgebuild.passes.torch_model import load_stage_model

        options = self.options(target)
        tensors, outputs = ctx.io.inputs, ctx.io.outputs
        started = time.perf_counter()
        model = load_stage_model(ctx)
        captured = capture(model, tensors, options.capture)
        check = check_capture(model, captured, tensors, options.capture,
                              options.check_samples, options.atol, options.rtol)
        profiles = io_profiles(ctx.io) if ctx.io.shapes else None
        floats = float_modules(model, options.keep_float)  # unknown names: PlanError (exit 2)
        mlmodel = convert(captured, tensors, outputs, options, profiles)
        consts = float_weight_consts(mlmodel, model, tensors, floats)
        mlmodel = compress(mlmodel, options, consts)
        package = ctx.out / PACKAGE
        save(mlmodel, package)
        converted = time.perf_counter() - started
        proxy, proxy_info = compress_like_coreml(model, options)
        proxy_path = save_proxy(proxy, tensors, options, ctx.out / PROXY_DIR)
        ops = program.read_program(package)
        rows = program.ane_table(ops)
        title = (f"{options.compute_precision} compute, weights {options.weights}, "
                 f"{options.minimum_deployment_target}")
        (ctx.out / PROGRAM_NOTE).write_text(program.render_markdown(rows, ops, title))
        package_bytes = sum(f.stat().st_size for f in package.rglob("*") if f.is_file())
        return OpResult(main=PACKAGE, format=self.produces, metadata={
            "capture_check": check, "compute_precision": options.compute_precision,
            "weights": options.weights, "program": program.summary(rows, ops),
            "kept_float": kept_float(options),
            "notes": [PROGRAM_NOTE], "ships": [PACKAGE], "package_bytes": package_bytes,
            "io": {"inputs": tensors, "outputs": outputs},
            "proxy": {"file": str(proxy_path.relative_to(ctx.out)), **proxy_info},
            "convert_seconds": round(converted, 2),
            "compile_seconds": round(time.perf_counter() - started, 2)})

    def runner(self, artifact: Artifact, target: Target, threads: int | None) -> Runner:
        io = artifact.metadata["io"]
        if on_macos():
            from edgebuild.backends.coreml.runner import CoreMlRunner

            options = self.options(target)
            return CoreMlRunner(artifact.main, io["inputs"], io["outputs"],
                                options.compute_units)
        from edgebuild.backends.coreml.proxy import ProxyRunner

        proxy = artifact.metadata["proxy"]
        return ProxyRunner(artifact.path / proxy["file"], io["inputs"], io["outputs"],
                           threads, half=proxy["compute"] == "fp16")

    def _probe(self, target: Target, purpose: str) -> str | None:
        return self.unmeasurable_reason(target, purpose) if purpose != "build" else None

    def unmeasurable_reason(self, target: Target, purpose: str = "latency") -> str:
        if purpose == "accuracy" or on_macos():
            return ""  # the proxy here; Core ML itself on a Mac
        return ("not measurable here: needs macOS (Core ML predicts only on Apple's OSes; "
                "this machine is " + platform.system() + "); attach a Mac as a Dask worker "
                "holding this target's resource (docs/backends-coreml.md)")

    def where(self, target: Target, purpose: str = "latency") -> str:
        if on_macos():
            return f"macOS host: Core ML on this Mac ({platform.machine()}), not the iPhone"
        if purpose != "accuracy":
            return ""
        options = self.options(target)
        weights = {"none": "fp16-rounded weights" if options.compute_precision == "fp16"
                   else "fp32 weights", "int8": f"int8 weights ({describe_int8(options)})",
                   "palettize": f"{options.palettize_bits}-bit palettized weights"}
        compute = f"{options.compute_precision} compute"
        if options.compute_precision == "fp16" and options.capture is not Capture.SCRIPT:
            compute = "fp16 values (each layer's output rounded to fp16, fp32 arithmetic)"
        return (f"host: weight-compression proxy — {weights[options.weights]} in PyTorch, "
                f"{compute}; not Core ML numerics")

    def device_latency(self, *args: Any, **kwargs: Any) -> None:
        return None

    def op_profile(self, artifact: Artifact, target: Target, threads: int | None,
                   feeds: dict[str, np.ndarray], shapes: dict[str, list[int]],
                   runs: int) -> OpProfile | None:
        """Core ML's compute plan on a Mac: per op the preferred device and estimated cost
        share (plan.py), not times; "not measurable here" elsewhere."""
        from edgebuild.backends.coreml.plan import compute_plan

        options = self.options(target)
        return compute_plan(artifact.main, options.compute_units)


def kept_float(options: CoreMlOptions) -> dict[str, Any] | None:
    """What the shared INT8 rules (quant/safety.py) mean for this build, said in
    the metadata like every other INT8 path's `kept_float`: compressed weights only,
    so the activation rules have nothing to exclude."""
    if options.weights == "none":
        return None
    compression = (f"int8 weights, {describe_int8(options)}" if options.weights == "int8"
                   else f"{options.palettize_bits}-bit palettized weights")
    kept = ([f"weights kept float16 (keep_float): {', '.join(options.keep_float)}"]
            if options.keep_float else [])
    return {"nodes": list(options.keep_float), "applies": False, "notes": [*kept,
        f"weight-only compression ({compression}): activations compute in "
        f"{options.compute_precision}, so the INT8 activation rules (mixed-range "
        "Concat/Add, output tail, signal front end) have nothing to keep float; "
        "W8A8 (activation quantization) is not built"]}


def describe_int8(options: CoreMlOptions) -> str:
    """`linear symmetric per output channel`, `linear per block of 16 input channels`, ..."""
    mode = options.int8_mode.replace("_", " ")
    where = ("per output channel" if options.granularity == "per_channel"
             else f"per block of {options.block_size} input channels")
    floats = f", {len(options.keep_float)} layers float" if options.keep_float else ""
    return f"{mode} {where}{floats}"
