"""Compile = convert ONNX (FP32, FP16 or QDQ INT8) or an NNCF-quantized IR to OpenVINO IR.

Two OpenVINO defaults would silently change what a recipe asked for, so both
are explicit options here, off unless a recipe turns them on:

- `save_model` stores weights as FP16 unless told otherwise (`compress_to_fp16`).
- On CPUs with AVX-512 BF16 or AMX, the CPU plugin computes in bf16 unless
  `INFERENCE_PRECISION_HINT` says otherwise (`inference_precision`, default f32;
  `default` leaves the choice to OpenVINO).

The compile stage also loads the IR on this machine when the device exists, so
a bad IR fails here rather than in a measurement, and the report shows the
precision each layer really runs in (a hint the CPU cannot honour is dropped),
labelled by `ir.precision_label`; the runner labels each measurement the same way.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from edgebuild.backends.base import Backend, Runner
from edgebuild.backends.declaration import Capabilities
from edgebuild.backends.openvino import ir
from edgebuild.backends.openvino.options import OpenVinoOptions, runtime_config
from edgebuild.backends.openvino.runner import OpenVinoRunner
from edgebuild.backends.openvino.shapes import shape_model
from edgebuild.core.op import OpResult, StageContext
from edgebuild.core.target import Target
from edgebuild.errors import StageError

if TYPE_CHECKING:
    import numpy as np

    from edgebuild.core.artifact import Artifact
    from edgebuild.measure.record import OpProfile


class OpenVinoBackend(Backend[OpenVinoOptions]):
    name = "openvino"
    summary = "Intel OpenVINO IR (CPU runs here; GPU/NPU build and plan)"
    accepts = ("onnx", "openvino-ir")
    produces = "openvino-ir"
    tools: ClassVar[tuple[str, ...]] = ("openvino", "onnx")
    # 3: `shapes: dynamic` dims bounded by the shape profiles; 4: the precision label
    version = 4
    extra = "openvino"
    capabilities = Capabilities(measures_memory=True)

    def compile(self, ctx: StageContext, target: Target) -> OpResult:
        ov = ir.load_openvino()
        model = ctx.input()
        options = self.options(target)
        if model.format == "onnx":
            from edgebuild.customops.openvino import convert_kwargs

            # A custom node is mapped onto OpenVINO ops here, by the recipe's conversion.
            try:
                ov_model = ov.convert_model(str(model.main), **convert_kwargs(model.main))
            except Exception as exc:
                raise _conversion_error(exc, model.main, ctx.io.inputs) from exc
            ir.name_outputs(ov_model, ir.onnx_output_names(model.main))
            quantization = ir.onnx_quantization(model.main)
        else:  # an IR from `openvino-quantize`: its outputs are named already
            ov_model = ov.Core().read_model(str(model.main))
            quantization = model.metadata.get("quantization", {}).get("path", "unknown")
        shapes = shape_model(ov, ov_model, options, ctx.io)
        destination = ctx.out / "model.xml"
        ov.save_model(ov_model, str(destination), compress_to_fp16=options.compress_to_fp16)
        graph = ir.ir_stats(destination)
        graph["quantization"] = quantization
        precision: dict[str, Any] = {
            "compress_to_fp16": options.compress_to_fp16,
            "inference_precision": options.inference_precision.value,
            "label": f"{options.inference_precision.value} (not checked: no "
                     f"{options.device.value} here)",
            **self._on_this_host(ov, destination, options),
        }
        # What took effect here, for a search's twin check (run/search.distinct): a hint
        # the plugin did not honour runs exactly like the precision it ran as.
        effective = ({"inference_precision": precision["effective_inference_precision"]}
                     if precision.get("checked_on_this_host") else {})
        return OpResult(
            main="model.xml", format="openvino-ir",
            metadata={"openvino": ir.version(), "source_format": model.format,
                      "effective_options": effective,
                      "device": options.device.value, "shapes": shapes,
                      "outputs": [o.get_any_name() for o in ov_model.outputs],
                      "graph": graph, "precision": precision})

    def runner(self, artifact: Artifact, target: Target, threads: int | None) -> Runner:
        options = self.options(target)
        return OpenVinoRunner(artifact.main, options.device.value,
                              runtime_config(options, threads))

    def op_profile(self, artifact: Artifact, target: Target, threads: int | None,
                   feeds: dict[str, np.ndarray], shapes: dict[str, list[int]],
                   runs: int) -> OpProfile | None:
        from edgebuild.backends.openvino.profile import op_profile

        options = self.options(target)
        config = {**runtime_config(options, threads), "PERF_COUNT": True}
        profile = op_profile(OpenVinoRunner(artifact.main, options.device.value, config),
                             feeds, shapes, runs)
        profile.threads = threads
        return profile

    def _probe(self, target: Target, purpose: str) -> str | None:
        # Where the target runs is cheap to tell; which devices OpenVINO sees is not.
        return super().unmeasurable_reason(target, purpose) if purpose != "build" else None

    def unmeasurable_reason(self, target: Target, purpose: str = "latency") -> str:
        reason = super().unmeasurable_reason(target, purpose)
        if reason:
            return reason
        device = self.options(target).device.value
        available = list(ir.load_openvino().Core().available_devices)
        if not any(d == device or d.startswith(f"{device}.") for d in available):
            return (f"not measurable here: needs an Intel {device} "
                    f"(OpenVINO on this machine sees only {', '.join(available) or 'nothing'})")
        return ""

    def _on_this_host(self, ov: Any, xml: Path, options: OpenVinoOptions) -> dict[str, Any]:
        """Load the IR on this machine's device, if it has one: what precision really runs."""
        core = ov.Core()
        device = options.device.value
        if device not in {d.split(".")[0] for d in core.available_devices}:
            return {"checked_on_this_host": False}
        compiled = core.compile_model(core.read_model(str(xml)), device,
                                      runtime_config(options, threads=1))
        return {"checked_on_this_host": True,
                "host_device": str(core.get_property(device, "FULL_DEVICE_NAME")),
                **ir.precision_facts(core, compiled, device,
                                     options.inference_precision.value)}


def _conversion_error(exc: Exception, source: Path,
                      declared: list[dict[str, Any]]) -> Exception:
    """A StageError with a hint when the graph has control flow only declared constants
    decide (`fold-inputs` removes it); else the converter's exception as it was."""
    from edgebuild.passes.fold_inputs import fold_hint

    try:
        hint = fold_hint(source, declared)
    except Exception:  # a hint is a courtesy: never hide the converter's error behind one
        hint = ""
    if not hint:
        return exc
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    failed = next((line.removeprefix("-- ") for line in lines
                   if line.startswith("-- Conversion is failed for")), "")
    node = next((line for line in lines if line.startswith("While validating")), "")
    reason = next((line for line in lines[lines.index(node) + 1:]
                   if not line.startswith(("Check '", "FrontEnd API"))), "") if node else ""
    said = f"{node} {reason}".strip() or (lines[0] if lines else repr(exc))
    return StageError(f"OpenVINO could not convert the model{f' ({failed})' if failed else ''}: "
                      f"{said}", hint)
