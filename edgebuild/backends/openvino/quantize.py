"""openvino-quantize: ONNX -> INT8 OpenVINO IR with NNCF post-training quantization.

The alternative to the ONNX QDQ path: NNCF quantizes the model as OpenVINO
sees it (FakeQuantize ops placed by the CPU plugin's own rules), which is
usually what runs fastest on Intel hardware.

`mode: accuracy-control` runs `nncf.quantize_with_accuracy_control`: quantize
everything, measure, and while the top-1 drop exceeds `max_drop`, revert the
layers that hurt most back to float. Its metric is top-1 accuracy against the
validation dataset's labels, or, without labels, top-1 agreement with the FP32
model — the same quantities the accuracy gate checks, in the same units
(percent, drop in points). NNCF has no clock, so `max_seconds` is enforced
between evaluations and fails the stage when exceeded: a build must end.

Safe by default, as the quantize pass: the nodes edgebuild's INT8 rules keep float
(quant/safety.py — mixed-range Concat/Add, the output tail, a signal front end)
go to NNCF as an `ignored_scope`, by the names OpenVINO gave them; a node OpenVINO's
frontend fused away is listed under `kept_float.not_in_ir`, never dropped silently.

The metadata's `quantization.path` (also under `graph`, which the report
shows) names what produced the model.
"""

from __future__ import annotations

import logging
import time
from enum import StrEnum
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from edgebuild.core.datasets import DatasetRef
from edgebuild.core.op import Op, OpResult, StageContext
from edgebuild.errors import BackendUnavailable, StageError
from edgebuild.quant.safety import DEFAULT_BOUND, KeepFloat

if TYPE_CHECKING:
    import numpy as np

    from edgebuild.data.loaders import Samples

log = logging.getLogger(__name__)


class Mode(StrEnum):
    DEFAULT = "default"
    ACCURACY_CONTROL = "accuracy-control"


ACCURACY_CONTROL_ONLY = ("validation_dataset", "max_drop", "max_iterations", "max_seconds",
                         "ranking_subset_size")


class OpenVinoQuantizeParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    dataset: DatasetRef = Field(description="Calibration dataset (a name under `datasets:`).")
    subset_size: int = Field(300, ge=1, description="Calibration samples NNCF uses, at most.")
    preset: Literal["performance", "mixed"] = Field(
        "performance", description="`performance`: symmetric activations; `mixed`: "
        "asymmetric activations (better for non-ReLU models).")
    target_device: Literal["ANY", "CPU", "GPU", "NPU", "CPU_SPR"] = Field(
        "CPU", description="Hardware whose quantization rules NNCF follows.")
    fast_bias_correction: bool = Field(True, description="False: slower, exact bias "
                                       "correction.")
    model_type: Literal["transformer"] | None = Field(
        None, description="`transformer`: NNCF's transformer scheme (attention-aware "
        "placement: Softmax, LayerNorm, GELU and the score MatMuls' float-sensitive inputs "
        "kept as NNCF's ignored patterns say; SmoothQuant on the weight MatMuls). Without it, "
        "a BERT-style encoder loses most of its accuracy.")
    mode: Mode = Field(Mode.DEFAULT, description="`default` or `accuracy-control`.")
    keep_float: KeepFloat = Field(
        KeepFloat.AUTO, description="As the quantize pass: `auto` keeps the output tail "
        "and a signal front end float (NNCF ignored_scope); `none` does not.")
    mixed_range_bound: float | None = Field(
        DEFAULT_BOUND, gt=1, description="As the quantize pass: a Concat/Add whose inputs' "
        "calibrated ranges differ by more than this factor is ignored by NNCF; null: off.")
    ignored_nodes: list[str] = Field(
        default_factory=list, description="More ONNX node names NNCF leaves float.")
    validation_dataset: DatasetRef | None = Field(
        None, description="accuracy-control: dataset scored for the drop; default: `dataset`.")
    max_drop: float | None = Field(
        None, gt=0, le=100, description="accuracy-control: largest top-1 drop, points "
        "(default 1.0).")
    max_iterations: int | None = Field(
        None, ge=1, description="accuracy-control: layer groups reverted to float, at most.")
    max_seconds: float | None = Field(
        None, gt=0, description="accuracy-control: fail the stage after this long "
        "(default 600).")
    ranking_subset_size: int | None = Field(
        None, ge=1, description="accuracy-control: samples used to rank layers.")

    @model_validator(mode="after")
    def _accuracy_control_params(self) -> OpenVinoQuantizeParams:
        if self.mode is Mode.DEFAULT:
            given = [f for f in ACCURACY_CONTROL_ONLY if getattr(self, f) is not None]
            if given:
                raise ValueError(f"{', '.join(given)} only apply with `mode: accuracy-control`")
        return self


class OpenVinoQuantize(Op):
    name = "openvino-quantize"
    # 4: the INT8 rules' float nodes go to NNCF's ignored_scope (quant/safety.py)
    version = 4
    target_specific = True  # the target's `shapes` option decides the IR's shapes
    Params = OpenVinoQuantizeParams
    accepts = ("onnx",)
    produces = "openvino-ir"
    tools: ClassVar[tuple[str, ...]] = ("openvino", "nncf", "onnx", "numpy")
    summary = "ONNX -> INT8 OpenVINO IR with NNCF (default or accuracy-controlled)"
    extra = "openvino"

    def run(self, ctx: StageContext, params: Any) -> OpResult:
        from edgebuild.backends.openvino import ir
        from edgebuild.core.shapes import calibration_profile, sample_shapes

        p: OpenVinoQuantizeParams = params
        ov = ir.load_openvino()
        nncf = _load_nncf()
        started = time.monotonic()
        from edgebuild.customops.openvino import convert_kwargs

        model = ov.convert_model(str(ctx.input().main), **convert_kwargs(ctx.input().main))
        ir.name_outputs(model, ir.onnx_output_names(ctx.input().main))
        ir_shapes, built = _shape_as_target(ov, model, ctx)
        calibration = ctx.dataset(p.dataset)
        shapes = sample_shapes(calibration)
        profile = calibration_profile("openvino-quantize", p.dataset, shapes, ctx.io, built)
        if p.mode is Mode.ACCURACY_CONTROL and p.validation_dataset is not None:
            validation = p.validation_dataset
            calibration_profile("openvino-quantize", validation,
                                sample_shapes(ctx.dataset(validation)), ctx.io, built)
        common: dict[str, Any] = {
            "preset": nncf.QuantizationPreset(p.preset),
            "target_device": nncf.TargetDevice(p.target_device),
            "subset_size": min(p.subset_size, len(calibration)),
            "fast_bias_correction": p.fast_bias_correction,
        }
        if p.model_type is not None:
            common["model_type"] = nncf.ModelType.TRANSFORMER
        kept = _kept_float(model, ctx.input().main, calibration, p)
        if kept["ignored_scope"]:
            common["ignored_scope"] = nncf.IgnoredScope(names=kept["ignored_scope"],
                                                        validate=False)
        info: dict[str, Any] = {"nncf": nncf.__version__, "calibration_dataset": p.dataset,
                                "calibration_samples": common["subset_size"],
                                "preset": p.preset, "target_device": p.target_device,
                                "model_type": p.model_type, "calibration_shapes": shapes,
                                "calibration_profile": profile, "ir_shapes": ir_shapes,
                                "kept_float": kept}
        items = [(calibration.feed(i), -1) for i in range(len(calibration))]
        calibration_set = nncf.Dataset(items, _feeds)
        if p.mode is Mode.DEFAULT:
            quantized = nncf.quantize(model, calibration_set, **common)
            info["path"] = "nncf-ptq"
        else:
            quantized, control = _accuracy_controlled(ov, nncf, model, calibration_set, ctx, p,
                                                      common, started)
            info.update(path="nncf-accuracy-control", **control)
        destination = ctx.out / "model.xml"
        ov.save_model(quantized, str(destination), compress_to_fp16=False)
        info["seconds"] = round(time.monotonic() - started, 2)
        graph = ir.ir_stats(destination)
        graph["quantization"] = info["path"]
        return OpResult(main="model.xml", format="openvino-ir",
                        metadata={"openvino": ir.version(), "quantization": info,
                                  "graph": graph})


def _shape_as_target(ov: Any, model: Any, ctx: StageContext
                     ) -> tuple[dict[str, str], dict[str, list[int]] | None]:
    """Shape the converted model as the target's compile will (static: fixed at the
    built shape; dynamic: bounded by the profiles), so NNCF calibrates the IR that is
    built. Returns the IR's input shapes and, for a static IR, the built shapes the
    calibration data must have."""
    from edgebuild.backends.openvino.backend import OpenVinoBackend
    from edgebuild.backends.openvino.options import Shapes
    from edgebuild.backends.openvino.shapes import shape_model

    if ctx.target is None or ctx.target.backend != "openvino":
        return {i.get_any_name(): str(i.get_partial_shape()) for i in model.inputs}, None
    options = OpenVinoBackend.options(ctx.target)
    ir_shapes = shape_model(ov, model, options, ctx.io)
    if options.shapes is not Shapes.STATIC:
        return ir_shapes, None
    built = {i.get_any_name(): [d.get_length() for d in i.get_partial_shape()]
             for i in model.inputs}
    return ir_shapes, built


RANGE_SAMPLES = 32


def _kept_float(model: Any, onnx_path: Any, calibration: Samples,
                p: OpenVinoQuantizeParams) -> dict[str, Any]:
    """The INT8 rules' float nodes of the ONNX input, named as in the IR (`model`)."""
    import onnx

    from edgebuild.quant.safety import float_nodes

    graph_model = onnx.load(str(onnx_path))
    probe = [calibration.feed(i) for i in range(min(RANGE_SAMPLES, len(calibration)))]
    chosen = float_nodes(graph_model, probe, p.keep_float.value, p.mixed_range_bound,
                         p.ignored_nodes)
    names = ir_names(model, graph_model.graph, chosen.names)
    info = chosen.to_json()
    info["ignored_scope"] = sorted({n for found in names.values() for n in found})
    info["not_in_ir"] = [n for n in chosen.names if not names.get(n)]
    return info


def ir_names(model: Any, graph: Any, nodes: list[str]) -> dict[str, list[str]]:
    """ONNX node name -> the names of the IR operations that compute it.

    OpenVINO's ONNX frontend names an operation after its ONNX node, or after the
    tensor it produces when that is a graph output; its own fusions may rename or
    remove one. Matched by either name, or by an output tensor name the operation
    keeps.
    """
    wanted = set(nodes)
    tensor_owner = {out: n.name for n in graph.node if n.name in wanted for out in n.output}
    found: dict[str, list[str]] = {n: [] for n in nodes}
    for op in model.get_ordered_ops():
        if op.get_type_name() in ("Constant", "Parameter", "Result"):
            continue
        name = op.get_friendly_name()
        owners = {name} & wanted
        if not owners:
            owners = {tensor_owner[t] for out in op.outputs() for t in out.get_names()
                      if t in tensor_owner}
        if not owners and name in tensor_owner:
            owners = {tensor_owner[name]}
        for owner in owners:
            found[owner].append(name)
    return found


def _load_nncf() -> Any:
    try:
        import nncf
    except ImportError as exc:
        raise BackendUnavailable("openvino", f"openvino-quantize needs nncf ({exc})",
                                 "openvino") from exc
    return nncf


def _feeds(item: tuple[dict[str, np.ndarray], int]) -> dict[str, np.ndarray]:
    """NNCF's transform: a (feeds, target class) item -> the model's inputs."""
    return item[0]


def _accuracy_controlled(ov: Any, nncf: Any, model: Any, calibration_set: Any,
                         ctx: StageContext, p: OpenVinoQuantizeParams,
                         common: dict[str, Any], started: float) -> tuple[Any, dict[str, Any]]:
    from nncf.quantization.advanced_parameters import AdvancedAccuracyRestorerParameters

    name = p.validation_dataset or p.dataset
    samples = ctx.dataset(name)
    fp32 = ov.Core().compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    targets, metric = _targets(fp32, samples)
    items = [(samples.feed(i), int(targets[i])) for i in range(len(samples))]
    max_drop = 1.0 if p.max_drop is None else p.max_drop
    max_seconds = 600.0 if p.max_seconds is None else p.max_seconds
    validate = _Validator(started + max_seconds, max_seconds)
    restorer: dict[str, Any] = {}
    if p.max_iterations is not None:
        restorer["max_num_iterations"] = p.max_iterations
    if p.ranking_subset_size is not None:
        restorer["ranking_subset_size"] = p.ranking_subset_size
    quantized = nncf.quantize_with_accuracy_control(
        model, calibration_set, nncf.Dataset(items, _feeds), validate,
        max_drop=max_drop, drop_type=nncf.DropType.ABSOLUTE, **common,
        advanced_accuracy_restorer_parameters=AdvancedAccuracyRestorerParameters(**restorer))
    evaluations = validate.calls
    # Score both models ourselves, so the report's numbers do not depend on NNCF's logs.
    validate.deadline = float("inf")
    reference, _ = validate(fp32, items)
    final, _ = validate(ov.Core().compile_model(quantized, "CPU",
                                                {"INFERENCE_PRECISION_HINT": "f32"}), items)
    drop = reference - final
    if drop > max_drop + 1e-9:
        log.warning("openvino-quantize: accuracy control ended %.3g points below FP32 "
                    "(max_drop %.3g); the accuracy gate decides", drop, max_drop)
    return quantized, {
        "validation_dataset": name, "validation_samples": len(items), "metric": metric,
        "max_drop": max_drop, "max_iterations": p.max_iterations, "max_seconds": max_seconds,
        "fp32_metric": round(reference, 4), "int8_metric": round(final, 4),
        "drop": round(drop, 4), "reached_max_drop": bool(drop <= max_drop + 1e-9),
        "evaluations": evaluations,
    }


def _top1(compiled: Any, samples: Samples) -> np.ndarray:
    import numpy as np

    request = compiled.create_infer_request()
    return np.array([int(np.argmax(request.infer(samples.feed(i))[0]))
                     for i in range(len(samples))])


def _targets(fp32: Any, samples: Samples) -> tuple[np.ndarray, str]:
    """What the metric counts as right: the labels, or FP32's own top-1 without labels."""
    if samples.labels is not None:
        return samples.labels.astype("int64"), "top1"
    return _top1(fp32, samples), "top1_agreement"


class _Validator:
    """NNCF's validation_fn: top-1 percent over (feeds, target) items, with a deadline."""

    def __init__(self, deadline: float, max_seconds: float) -> None:
        self.deadline = deadline
        self.max_seconds = max_seconds
        self.calls = 0

    def __call__(self, compiled: Any, items: Any) -> tuple[float, list[float]]:
        import numpy as np

        if time.monotonic() > self.deadline:
            raise StageError(
                f"openvino-quantize: accuracy control did not finish within "
                f"max_seconds={self.max_seconds:g} ({self.calls} evaluations done)",
                "raise max_seconds, or bound the search with max_iterations, "
                "ranking_subset_size or a smaller validation dataset (`limit:`)")
        self.calls += 1
        # Inputs copied (share_inputs=False, the default), never read in place: see
        # the runner's note on OpenVINO's dynamic-shape stale-output issue.
        request = compiled.create_infer_request()
        scores = [100.0 * float(int(np.argmax(request.infer(feeds)[0])) == target)
                  for feeds, target in items]
        return float(np.mean(scores)), scores
