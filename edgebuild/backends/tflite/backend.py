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

import time
from typing import TYPE_CHECKING, Any, ClassVar

from edgebuild.backends.base import Backend
from edgebuild.backends.tflite.options import Precision, TfliteOptions
from edgebuild.backends.tflite.runtime import TfliteRuntime
from edgebuild.core.op import OpResult, StageContext
from edgebuild.core.target import Target

if TYPE_CHECKING:

    pass


class TfliteBackend(TfliteRuntime, Backend[TfliteOptions]):
    name = "tflite"
    summary = "TensorFlow Lite / LiteRT (host interpreter here; phones over adb)"
    accepts = ("tf-savedmodel",)
    produces = "tflite"
    tools: ClassVar[tuple[str, ...]] = ("tensorflow-cpu", "ai-edge-litert")
    version = 2  # 2: int8 keeps the INT8 rules' float nodes float (keep_float.py)
    extra: ClassVar[str | None] = "tflite"
    # onnx2tf: the ONNX (NCHW) graph as a SavedModel (NHWC)
    conversions: ClassVar[tuple[str, ...]] = ("onnx-to-tf",)
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
                      "nnapi": coverage_summary(rows, options.android_api_level)})


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


def coverage_summary(rows: list[Any], api_level: int) -> dict[str, Any]:
    from dataclasses import asdict

    table = [asdict(r) for r in rows]
    return {"android_api_level": api_level, "ops": table}
