"""quantize: INT8 (dynamic, or static QDQ with calibration) and FP16, for ONNX models.

The op only: its params are `edgebuild.quant.params.QuantizeParams`, and the work is
the INT8 wing's (edgebuild/quant/: the engines, the quality levers, the accuracy-aware
search and the fidelity budget), imported inside `run`, in the worker.

Quality levers, each measured on EfficientNet-Lite0 in docs/passes.md
("Quantization levers"): `equalize` (cross-layer equalization) and
`bias_correction` rewrite the float model around the quantizer;
`keep_activations`, `dedicated_qdq_pair` and `ort_extra_options` decide where the
QDQ pairs go, which decides what ONNX Runtime can fuse. With `accuracy_aware` or a
`budget`, every step tried is recorded in the stage's metadata and the report.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from edgebuild.core.op import Op, OpResult, StageContext
from edgebuild.passes.onnx_stats import graph_stats
from edgebuild.quant.params import QuantizeParams


class Quantize(Op):
    name = "quantize"
    # 8: safe by default — mixed-range Concat/Add, the output tail and a signal front end
    # stay float (quant/safety.py); the per-layer report ranks by effect on the outputs
    # 9: `emit: corrected-float` (the bias-corrected float model, for TFLite)
    # 10: entropy/percentile histograms keep ONNX Runtime's bin count over the whole range
    #     (quant/engines/ort_histograms.py: other ranges than 9's); `score_range` in the
    #     metadata
    version = 10
    Params = QuantizeParams
    accepts = ("onnx",)
    produces = "onnx"
    tools: ClassVar[tuple[str, ...]] = ("onnx", "onnxruntime", "numpy")
    summary = "INT8 (dynamic / static QDQ with calibration) or FP16"

    def host_bound(self, params: dict[str, Any]) -> bool:
        """A budget or an accuracy-aware search judges INT8 outputs computed on this CPU."""
        return params.get("budget") is not None or params.get("accuracy_aware") is not None

    def run(self, ctx: StageContext, params: Any) -> OpResult:
        import tempfile

        from edgebuild.core.shapes import calibration_profile, sample_shapes
        from edgebuild.quant import strategy
        from edgebuild.quant.engine import guarded_layers
        from edgebuild.quant.engines.ort import refuse_custom_nodes
        from edgebuild.quant.samples import first
        from edgebuild.quant.search import sensitivity

        p: QuantizeParams = params
        source = ctx.input().main
        refuse_custom_nodes(source)
        destination = ctx.out / "model.onnx"
        calibration = None
        metadata: dict[str, Any] = {"mode": p.mode}
        if p.calibration is not None:
            calibration = ctx.dataset(p.calibration)
            # The output keeps its dynamic axes and is timed at every profile: its ranges
            # must come from data at one of them (edgebuild/core/shapes.py).
            shapes = sample_shapes(calibration)
            metadata["calibration_shapes"] = shapes
            metadata["calibration_profile"] = calibration_profile(
                "quantize", p.calibration, shapes, ctx.io)
            if p.calibration_samples < len(calibration):
                calibration = first(calibration, p.calibration_samples)
        # Intermediate models and the calibration cache stay out of the artifact.
        with tempfile.TemporaryDirectory(prefix="edgebuild-quantize-") as work:
            scratch = Path(work)
            prepared, p = strategy.write(ctx, source, destination, p, calibration, scratch,
                                         metadata)
            metadata.update(prepared.metadata)
            if p.emit == "corrected-float":
                metadata["emit"] = "corrected-float"
            elif p.mode != "fp16":
                metadata["float_layers_guarded"] = guarded_layers(destination)
            if p.compare_samples and p.emit == "qdq":
                metadata["layers"] = sensitivity.layer_report(
                    source, destination, ctx, calibration, p.compare_samples, prepared, p,
                    scratch)
        metadata.update(before=graph_stats(source), after=graph_stats(destination))
        return OpResult(main="model.onnx", format="onnx", metadata=metadata)
