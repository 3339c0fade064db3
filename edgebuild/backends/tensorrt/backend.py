"""NVIDIA TensorRT: the TensorRT-ready ONNX built and checked here, the engine on the device.

    ONNX ─ compile (here) ─▶ model.onnx: fp16 mixed precision (fp16.py) | Q/DQ int8 as is
         │                  + tensorrt.md: the parser coverage table and the trtexec line
         ├─ infer (here) ── ONNX Runtime on that ONNX: its numerics, not the engine's
         └─ build-engine (on the device) ─▶ model.engine + timing.cache + engine.json
                 └─ measure-latency (on the device)

Why split: an engine runs only on the GPU and TensorRT version it was built with,
and this machine has neither; everything that can be decided without them — the
types TensorRT will run, whether the parser takes every node, the Q/DQ placement,
the accuracy of those numerics — is decided here, so a build that will fail on the
device fails at compile time. The build stage runs where the target's device is (a
Dask worker tagged `jetson-orin`, or an ssh board); anywhere else it is a typed "not
buildable here" that the recipe's policy judges, like an unmeasurable latency.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from edgebuild.backends.base import Backend, Runner
from edgebuild.backends.declaration import Placement, Where
from edgebuild.backends.tensorrt.checks import check_qdq
from edgebuild.backends.tensorrt.options import (
    MODEL,
    ShapeProfile,
    TensorRtOptions,
    TrtPrecision,
    Unsupported,
    input_profiles,
    shell_line,
    trtexec_command,
)
from edgebuild.backends.tensorrt.trtexec import trtexec_latency, trtexec_profile
from edgebuild.core.op import OpResult, StageContext
from edgebuild.core.shapes import io_profiles
from edgebuild.core.target import Target
from edgebuild.errors import BackendUnavailable, StageError

if TYPE_CHECKING:
    from edgebuild.core.artifact import Artifact
    from edgebuild.measure.record import LatencyRecord, OpProfile
    from edgebuild.recipe.common import MeasureSettings

NOTES = "tensorrt.md"
TRTEXEC = "trtexec.sh"
ENGINE_FORMAT = "tensorrt-engine"


class TensorRtBackend(Backend[TensorRtOptions]):
    name = "tensorrt"
    summary = ("NVIDIA TensorRT: TensorRT-ready ONNX (FP16 / explicit Q/DQ INT8) and parser "
               "coverage here; engine built and timed on the device")
    accepts = ("onnx",)
    produces = "tensorrt-onnx"
    tools: ClassVar[tuple[str, ...]] = ("onnx", "onnxruntime", "polygraphy", "tensorrt")
    device_tools: ClassVar[tuple[str, ...]] = ("tensorrt",)
    version = 2  # 2: the stand-in runs Q/DQ as written (no CPU int8 kernels)
    extra = "tensorrt"
    install_hint = ("TensorRT comes with JetPack on a Jetson (python3-libnvinfer), elsewhere "
                    "from NVIDIA's package index: docs/backends-tensorrt.md")
    # The engine is built on the device; accuracy runs the TensorRT-ready ONNX here.
    placement = Placement(device_build=True, accuracy=Where.HOST)
    # The device builds the engine with the optimization profiles compile derived: a
    # baseline's (run --baseline, from its manifest) needs them as much as this build's.
    runner_metadata: ClassVar[tuple[str, ...]] = ("profiles",)

    def compile(self, ctx: StageContext, target: Target) -> OpResult:
        import onnx

        from edgebuild.backends.tensorrt.coverage import coverage

        options = self.options(target)
        source = ctx.input().main
        metadata: dict[str, Any] = {"precision": options.precision.value,
                                    "typing": options.typing.value,
                                    "tensorrt_version": options.tensorrt_version,
                                    "compute_capability": options.compute_capability}
        model = ctx.out / MODEL
        with tempfile.TemporaryDirectory(prefix="edgebuild-tensorrt-") as work:
            start = _sanitized(source, Path(work)) if options.sanitize else source
            metadata["sanitized"] = options.sanitize
            if options.precision is TrtPrecision.FP16:
                metadata["fp16"] = _fp16(start, model, options, ctx)
            else:
                if options.precision is TrtPrecision.INT8:
                    metadata["qdq"] = check_qdq(onnx.load(str(start), load_external_data=False))
                shutil.copyfile(start, model)
        found = coverage(onnx.load(str(model), load_external_data=False),
                         options.tensorrt_version)
        metadata["coverage"] = found.summary
        if found.unsupported and options.unsupported is Unsupported.FAIL:
            named = ", ".join(f"{r.op} ({', '.join(r.examples[:3])})" for r in found.unsupported)
            raise StageError(f"TensorRT {options.tensorrt_version}'s ONNX parser does not "
                             f"support {named}",
                             "replace the op, or provide a plugin on the device and set the "
                             "target option `unsupported: report` (docs/backends-tensorrt.md)")
        profiles = input_profiles(options, ctx.io.inputs, [d.name for d in found.dynamic_inputs],
                                  io_profiles(ctx.io))
        command = trtexec_command(options, MODEL, profiles)
        (ctx.out / TRTEXEC).write_text(
            "#!/bin/sh\n# Builds the same engine by hand on the device (TensorRT "
            f"{options.tensorrt_version}, sm {options.compute_capability}), next to {MODEL}.\n"
            + shell_line(command) + "\n")
        (ctx.out / NOTES).write_text(
            f"### TensorRT build\n\nOn the device, next to `{MODEL}`:\n\n```sh\n"
            f"{shell_line(command)}\n```\n\n" + found.markdown())
        metadata.update({"trtexec": shell_line(command), "notes": [NOTES],
                         "profiles": {n: p.model_dump() for n, p in profiles.items()}})
        return OpResult(main=MODEL, format=self.produces, metadata=metadata)

    def build_on_device(self, ctx: StageContext, target: Target) -> OpResult:
        """The engine, on the target's device; elsewhere a typed "not buildable here"."""
        reason = self.unbuildable_reason(target)
        if reason:
            return OpResult(main="", format=ENGINE_FORMAT, unmeasurable=reason)
        from edgebuild.backends.tensorrt import engine
        from edgebuild.backends.tensorrt.cuda import gpu_here

        options = self.options(target)
        gpu = gpu_here()
        assert not isinstance(gpu, str)  # unbuildable_reason checked it
        version = engine.major_minor(engine.trt_version())
        if (version, gpu.compute_capability) != (options.tensorrt_version,
                                                  options.compute_capability):
            raise StageError(
                f"target '{target.name}' declares TensorRT {options.tensorrt_version} on sm "
                f"{options.compute_capability}, but this device ({gpu.name}) has TensorRT "
                f"{version}, sm {gpu.compute_capability}",
                "set `tensorrt_version` and `compute_capability` in the target's options to "
                "the device's: they key the engine, which runs only where it was built")
        compiled = ctx.input()
        profiles = {name: ShapeProfile.model_validate(shape)  # compile derived them
                    for name, shape in compiled.metadata.get("profiles", {}).items()}
        shutil.copyfile(compiled.main, ctx.out / MODEL)  # the engine's source, kept with it
        tag = engine.build(ctx.out / MODEL, ctx.out, options, profiles, gpu)
        return OpResult(main=engine.ENGINE, format=ENGINE_FORMAT, metadata=tag)

    def runner(self, artifact: Artifact, target: Target, threads: int | None) -> Runner:
        if artifact.format == ENGINE_FORMAT:
            from edgebuild.backends.tensorrt.engine import EngineRunner

            return EngineRunner(artifact.path)
        from edgebuild.backends.onnxruntime.options import GraphLevel, OrtOptions
        from edgebuild.backends.onnxruntime.runner import OrtRunner

        # The TensorRT-ready ONNX in ONNX Runtime: the accuracy gate's stand-in for the
        # engine (its FP16 casts and Q/DQ are the numerics TensorRT is told to use). No
        # graph optimization: each Q/DQ is computed as written, in float, as TensorRT's
        # int8 kernels accumulate exactly; fused into ONNX Runtime's CPU int8 kernels it
        # took this host's numerics instead (u8/s8 pair sums saturate without VNNI: the
        # quickstart's int8 build fell from 77 % to 31 % top-1 agreement on an AVX2 CPU).
        return OrtRunner(artifact.main, OrtOptions(graph_optimization_level=GraphLevel.DISABLE),
                         threads)

    def _probe(self, target: Target, purpose: str) -> str | None:
        if purpose == "accuracy":
            return None  # '': ONNX Runtime runs the TensorRT-ready ONNX here
        reason = self._no_tensorrt_here(target)
        return reason.replace("not buildable", "not measurable", 1) if purpose == "latency" \
            else reason

    def _no_tensorrt_here(self, target: Target) -> str:
        """The cheap half of `unbuildable_reason`: not the device's worker, or no tensorrt
        installed (found, not imported)."""
        worker = f"edgebuild worker SCHEDULER --target {target.profile.name}"
        if not target.runs_here:
            where = ("and run with --cluster tls://SCHEDULER:8786 (mutual TLS, docs/security.md)"
                     if target.runs_on.kind.value == "dask"
                     else f"(runs_on: {target.runs_on.kind.value})")
            return (f"not buildable here: TensorRT needs an NVIDIA GPU; start `{worker}` on the "
                    f"device {where} (docs/backends-tensorrt.md)")
        import importlib.util
        import socket

        if importlib.util.find_spec("tensorrt") is None:
            return (f"tools missing on worker {socket.gethostname()}: tensorrt (JetPack's "
                    "python3-libnvinfer, or NVIDIA's wheels: docs/backends-tensorrt.md)")
        return ""

    def unbuildable_reason(self, target: Target) -> str:
        """'' when this process can build and run engines for `target`, else why not."""
        reason = self._no_tensorrt_here(target)
        if reason:
            return reason
        import socket

        from edgebuild.backends.tensorrt.cuda import gpu_here

        gpu = gpu_here()
        if isinstance(gpu, str):
            return f"not buildable here: no usable NVIDIA GPU on {socket.gethostname()} ({gpu})"
        return ""

    def unmeasurable_reason(self, target: Target, purpose: str = "latency") -> str:
        if purpose == "accuracy":
            return ""  # ONNX Runtime runs the TensorRT-ready ONNX here
        return self.unbuildable_reason(target).replace("not buildable", "not measurable", 1)

    def where(self, target: Target, purpose: str = "latency") -> str:
        if purpose != "accuracy":
            return ""
        from importlib.metadata import version

        return (f"host: the TensorRT-ready ONNX in ONNX Runtime {version('onnxruntime')} — "
                "its FP16 / Q/DQ numerics computed as written, not the engine's")

    def device_latency(self, artifact: Artifact, target: Target,
                       settings: MeasureSettings) -> LatencyRecord | None:
        options = self.options(target)
        if options.latency_tool != "trtexec":
            return None  # the latency protocol times EngineRunner.infer in this process
        return trtexec_latency(artifact.path, options, settings)

    def op_profile(self, artifact: Artifact, target: Target, threads: int | None,
                   feeds: dict[str, Any], shapes: dict[str, list[int]],
                   runs: int) -> OpProfile | None:
        """trtexec's per-layer profile of the engine (`latency_tool: python` times the
        engine in this process; its profile is trtexec's, in a run of its own)."""
        if shutil.which("trtexec") is None:
            from edgebuild.measure.record import OpProfile

            return OpProfile(unmeasurable="not measurable here: trtexec is not on PATH "
                             "(JetPack has it in /usr/src/tensorrt/bin)")
        return trtexec_profile(artifact.path, runs)


def _sanitized(source: Path, work: Path) -> Path:
    """Polygraphy's `surgeon sanitize --fold-constants`, in process."""
    try:
        import onnx
        from polygraphy.backend.onnx import fold_constants
    except ImportError:
        raise BackendUnavailable("`sanitize: true` needs polygraphy",
                                 "pip install 'edgebuild[tensorrt-onnx]'") from None
    folded = fold_constants(onnx.load(str(source)), error_ok=False)
    path = work / "sanitized.onnx"
    onnx.save(folded, str(path))
    return path


def _fp16(source: Path, destination: Path, options: TensorRtOptions,
          ctx: StageContext) -> dict[str, Any]:
    from edgebuild.backends.tensorrt.fp16 import convert

    samples = (ctx.dataset(options.calibration_dataset)
               if options.calibration_dataset is not None else None)
    return convert(source, destination, samples, options.calibration_samples,
                   options.fp16_data_max, options.fp16_keep_ops, options.fp16_keep_nodes,
                   ctx.io.inputs)


__all__ = ["ENGINE_FORMAT", "TensorRtBackend"]
