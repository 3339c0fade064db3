"""TFLite (LiteRT) for Android: SavedModel -> .tflite, host interpreter, adb device.

The planner puts `onnx-to-tf` (onnx2tf: NCHW -> NHWC) in front of this backend;
compile quantizes that SavedModel at the target's precision (convert.py),
records how each recipe tensor maps onto the model's (tensors.py: layout permutation,
integer scale/zero point), and writes the NNAPI coverage table for the target's
Android API level. Accuracy always runs on this machine's interpreter; latency
runs there too (`latency_on: host`, labelled as host figures) or on an attached
phone through adb and TFLite's `benchmark_model` (`latency_on: device`).
"""

from __future__ import annotations

import platform
import time
from typing import TYPE_CHECKING, Any, ClassVar

from edgebuild.backends.base import Backend, Runner
from edgebuild.backends.tflite.options import (
    Delegate,
    DelegateFallback,
    LatencyOn,
    Precision,
    TfliteOptions,
)
from edgebuild.core.op import OpResult, StageContext
from edgebuild.core.profile import RunnerKind
from edgebuild.core.target import Target

if TYPE_CHECKING:
    import numpy as np

    from edgebuild.core.artifact import Artifact
    from edgebuild.measure.record import LatencyRecord, OpProfile
    from edgebuild.recipe.common import MeasureSettings


class TfliteBackend(Backend[TfliteOptions]):
    name = "tflite"
    summary = "TensorFlow Lite / LiteRT (host interpreter here; phones over adb)"
    accepts = ("tf-savedmodel",)
    produces = "tflite"
    tools: ClassVar[tuple[str, ...]] = ("tensorflow-cpu", "ai-edge-litert")
    version = 2  # 2: int8 keeps the INT8 rules' float nodes float (keep_float.py)
    extra = "tflite"
    conversions = ("onnx-to-tf",)  # onnx2tf: the ONNX (NCHW) graph as a SavedModel (NHWC)
    runner_metadata = ("io",)  # how recipe tensors map onto the model's (layout, scale)

    def compile(self, ctx: StageContext, target: Target) -> OpResult:
        from edgebuild.backends.tflite import convert, keep_float, nnapi
        from edgebuild.backends.tflite.tensors import io_spec, savedmodel_spec, signature_feeds

        options = self.options(target)
        model, out = ctx.input(), ctx.out
        saved_model = model.main.parent
        spec = savedmodel_spec(model)
        feeds, calibration, count = None, None, 0
        if options.calibration_dataset is not None:
            calibration = ctx.dataset(options.calibration_dataset)
            count = min(len(calibration), options.calibration_samples)
            feeds = [signature_feeds(calibration.feed(i), spec) for i in range(count)]
        started = time.perf_counter()
        kept = None
        if options.precision is Precision.INT8:
            kept = keep_float.choose(model, options, calibration, count)
        flatbuffer = convert.convert(saved_model, options, feeds, kept)
        seconds = time.perf_counter() - started
        destination = out / "model.tflite"
        destination.write_bytes(flatbuffer)
        io = io_spec(destination, model.metadata)
        ops = nnapi.model_ops(destination)
        rows = nnapi.coverage(ops, options.android_api_level)
        (out / "nnapi_coverage.md").write_text(
            nnapi.render_markdown(rows, options.android_api_level))
        return OpResult(
            main="model.tflite", format="tflite",
            metadata={"precision": options.precision.value, "io": io,
                      "convert_seconds": round(seconds, 2),
                      "onnx2tf_seconds": model.metadata.get("seconds"),
                      "calibration_samples": len(feeds or []),
                      "kept_float": _kept_float(options, kept),
                      "notes": ["nnapi_coverage.md"],
                      "nnapi": _coverage_summary(rows, options.android_api_level)})

    def runner(self, artifact: Artifact, target: Target, threads: int | None) -> Runner:
        from edgebuild.backends.tflite.runner import TfliteRunner

        options = self.options(target)
        return TfliteRunner(artifact.main, artifact.metadata["io"], threads,
                            use_xnnpack=options.delegate is not Delegate.CPU,
                            fallback=options.delegate_fallback is DelegateFallback.BUILTIN)

    def memory_measurable(self, target: Target) -> bool:
        """On the host the runner runs ai-edge-litert in the measuring process, so
        measuring/footprint.py reads its peak memory as for ONNX Runtime; on a phone the
        memory is benchmark_model's (device.py)."""
        return self.options(target).latency_on is LatencyOn.HOST

    def op_profile(self, artifact: Artifact, target: Target, threads: int | None,
                   feeds: dict[str, np.ndarray], shapes: dict[str, list[int]],
                   runs: int) -> OpProfile | None:
        """LiteRT's C API profiler on this host (profile.py). On a phone the profile is
        benchmark_model's (device.py, with the latency: `device_latency`)."""
        from edgebuild.backends.tflite.profile import op_profile
        from edgebuild.measure.record import OpProfile

        options = self.options(target)
        if options.latency_on is LatencyOn.DEVICE:
            return OpProfile(unmeasurable="not measurable here: this target's latency runs "
                             "on the phone; its per-op profile is benchmark_model's, taken "
                             "with the on-device latency")
        return op_profile(artifact.main, artifact.metadata["io"], threads,
                          options.delegate is not Delegate.CPU, feeds, runs)

    def _probe(self, target: Target, purpose: str) -> str | None:
        # On the phone: adb (`devices -l`, a file test on the phone). Else '': measurable.
        return self.unmeasurable_reason(target, purpose) if purpose == "latency" else None

    def unmeasurable_reason(self, target: Target, purpose: str = "latency") -> str:
        options = self.options(target)
        if purpose == "latency" and options.latency_on is LatencyOn.DEVICE:
            from edgebuild.backends.tflite import device

            return device.unavailable_reason(target.phone_serial(options.device_serial),
                                             options.benchmark_model)
        return ""  # accuracy, and host latency: ai-edge-litert runs here

    def where(self, target: Target, purpose: str = "latency") -> str:
        options = self.options(target)
        if purpose == "latency" and options.latency_on is LatencyOn.DEVICE:
            return f"device: Android phone over adb, {options.delegate.value} delegate"
        kernels = "builtin kernels" if options.delegate is Delegate.CPU else "XNNPACK"
        if target.runs_on.kind is RunnerKind.EMULATED:  # the phone's CPU kernels, emulated
            return f"ai-edge-litert interpreter, {kernels} (the phone's CPU path)"
        return (f"host: {platform.machine()} ai-edge-litert interpreter, {kernels} — a host "
                f"figure, not the phone's ({options.delegate.value} delegate)")

    def device_latency(self, artifact: Artifact, target: Target,
                       settings: MeasureSettings) -> LatencyRecord | None:
        options = self.options(target)
        if options.latency_on is not LatencyOn.DEVICE:
            return None
        from edgebuild.backends.tflite import device
        from edgebuild.measure.record import LatencyRecord, read_record

        return read_record(LatencyRecord, device.benchmark(
            artifact.main, delegate=options.delegate.value, threads=settings.threads,
            warmup_runs=settings.warmup_iterations, num_runs=settings.min_iterations,
            serial=target.phone_serial(options.device_serial), binary=options.benchmark_model,
            fallback=options.delegate_fallback is DelegateFallback.BUILTIN,
            op_profile=settings.profile),
            "the phone's benchmark_model")


def _kept_float(options: TfliteOptions, kept: Any) -> dict[str, Any] | None:
    """What the INT8 rules kept float in this build, or why they do not apply."""
    precision = options.precision
    if precision is Precision.INT8:
        if kept is None:
            return {"nodes": [], "notes": ["no ONNX graph beside the SavedModel (it did not "
                                           "come from onnx-to-tf): the INT8 rules could not "
                                           "run, every op is int8"]}
        found: dict[str, Any] = kept.to_json()
        return found
    reason = {
        Precision.DYNAMIC_INT8: "weights only (int8 weights, float activations): activation "
                                "exclusions do not apply",
        Precision.INT16X8: "not applied: TFLite's 16x8 quantizer has no node denylist (16-bit "
                           "activations leave a range ratio r 65536 / r codes)"}.get(precision)
    return {"nodes": [], "notes": [reason]} if reason else None


def _coverage_summary(rows: list[Any], api_level: int) -> dict[str, Any]:
    from dataclasses import asdict

    table = [asdict(r) for r in rows]
    return {"android_api_level": api_level, "ops": table}
