"""Reading and describing OpenVINO models, shared by the backend and `openvino-quantize`.

Everything here imports openvino inside the function that needs it, so that
importing the backend module (which the recipe loader does to validate
options) stays light.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from edgebuild.errors import BackendUnavailable

# Op types that are plumbing rather than computation; left out of the node count
# so that it compares with the ONNX node count of the same model.
_PLUMBING = {"Parameter", "Result", "Constant"}


def load_openvino() -> Any:
    """The `openvino` module, or BackendUnavailable naming the pip extra."""
    try:
        import openvino
    except ImportError as exc:
        raise BackendUnavailable("openvino", f"the openvino package cannot be imported ({exc})",
                                 "openvino") from exc
    return openvino


def version() -> str:
    """The runtime's full build string, e.g. '2026.4.1-22982-…'."""
    return str(load_openvino().get_version())


def onnx_output_names(path: Path) -> list[str]:
    """The ONNX graph's output names in order: the names gates compare by."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    return [output.name for output in model.graph.output]


def name_outputs(model: Any, names: list[str]) -> None:
    """Give output i exactly the tensor name `names[i]`.

    OpenVINO can attach several names to one tensor (an ONNX output that is also
    an internal edge, or a fused QDQ pair), and `get_any_name()` may then return
    a name the recipe never declared; the reference outputs are keyed by the ONNX
    names, so the artifact must answer with those and only those.
    """
    if len(names) != len(model.outputs):
        raise ValueError(f"the model has {len(model.outputs)} outputs, expected {names}")
    for output, name in zip(model.outputs, names, strict=True):
        output.get_tensor().set_names({name})


def ir_stats(xml: Path) -> dict[str, Any]:
    """Op counts by type, constant precisions and file sizes of a saved IR.

    Read back from disk rather than taken from the in-memory model, because
    `save_model` rewrites the model as it saves it (FP16 compression).
    """
    model = load_openvino().Core().read_model(str(xml))
    ops = Counter(op.get_type_name() for op in model.get_ordered_ops())
    weights = Counter(str(op.get_element_type().get_type_name())
                      for op in model.get_ordered_ops() if op.get_type_name() == "Constant")
    compute = {k: v for k, v in sorted(ops.items()) if k not in _PLUMBING}
    bin_file = xml.with_suffix(".bin")
    return {
        "nodes": sum(compute.values()),
        "ops": compute,
        "constants_by_type": dict(sorted(weights.items())),
        "bytes": xml.stat().st_size + (bin_file.stat().st_size if bin_file.exists() else 0),
    }


def onnx_quantization(path: Path) -> str:
    """Which ONNX INT8 form the source carries: 'onnx-qdq', 'onnx-dynamic-int8' or 'none'."""
    from edgebuild.passes.onnx_stats import graph_stats

    ops = graph_stats(path)["ops"]
    if ops.get("QuantizeLinear") or ops.get("DequantizeLinear"):
        return "onnx-qdq"
    if any(ops.get(op) for op in ("DynamicQuantizeLinear", "MatMulInteger", "ConvInteger")):
        return "onnx-dynamic-int8"
    return "none"


def runtime_precisions(compiled: Any) -> dict[str, int]:
    """How many executed layers run in each precision, as the device plugin reports.

    This is the ground truth for "did it really run in bf16 / int8": a hint the
    hardware cannot honour is silently replaced by the plugin's default (on an AVX2-only
    CPU `bf16` runs as f32; on an AVX-512 BF16 CPU without FP16, `f16` runs as bf16).
    """
    counts: Counter[str] = Counter()
    for op in compiled.get_runtime_model().get_ordered_ops():
        info = op.get_rt_info()
        if str(info["layerType"].astype(str)) in ("Input", "Output", "Const"):
            continue
        counts[str(info["runtimePrecision"].astype(str))] += 1
    return dict(sorted(counts.items()))


# OPTIMIZATION_CAPABILITIES entry that means the CPU computes in that precision natively.
_NATIVE = {"bf16": "BF16", "f16": "FP16", "f32": "FP32"}


def precision_facts(core: Any, compiled: Any, device: str, requested: str) -> dict[str, Any]:
    """What precision a compiled model really runs in, read back from the device plugin:
    the compiled model's INFERENCE_PRECISION_HINT, each executed layer's runtime
    precision and the device's OPTIMIZATION_CAPABILITIES, with `precision_label`."""
    effective = str(compiled.get_property("INFERENCE_PRECISION_HINT").get_type_name())
    layers = runtime_precisions(compiled)
    try:
        capabilities = [str(c) for c in core.get_property(device, "OPTIMIZATION_CAPABILITIES")
                        if str(c) != "EXPORT_IMPORT"]  # a feature, not a precision
    except Exception:  # a plugin that does not answer: the label does without
        capabilities = []
    label, honoured = precision_label(requested, effective, layers, capabilities,
                                      device.split(".")[0])
    return {"requested_inference_precision": requested,
            "effective_inference_precision": effective, "runtime_precisions": layers,
            "device_capabilities": capabilities, "label": label, "honoured": honoured}


def precision_label(requested: str, effective: str, layers: dict[str, int],
                    capabilities: list[str], device: str = "CPU") -> tuple[str, bool]:
    """The report's one-line precision label, and whether the request was honoured.

        f32  -> f32  {f32: 5}             "f32"
        bf16 -> f32  caps FP32, INT8, BIN "bf16 requested; this CPU has no native bf16
                                           (OpenVINO CPU capabilities: FP32, INT8, BIN):
                                           ran as f32 (layers: f32 5)"
        f16 -> bf16  caps BF16, …, no FP16 "f16 requested; this CPU has no native f16
                                           (…): ran as bf16 (layers: bf16 9, f32 9)"
        default -> f32                    "OpenVINO's default (no precision hint): ran as
                                           f32 on this CPU (layers: f32 5)"

    The layer counts are appended whenever a layer runs in another precision than the
    effective one (int8 layers of a quantized model, f32 layers left in a bf16 graph)
    or the request was not honoured; "no native" is said only when the capabilities
    show it. What an unhonoured hint ran as is `effective` as the plugin reports it
    (its default on that CPU), never assumed to be f32.
    """
    counts = ", ".join(f"{p} {n}" for p, n in sorted(layers.items()))
    mixed = set(layers) - {effective}
    suffix = f" (layers: {counts})" if counts else ""
    if requested == "default":
        return (f"OpenVINO's default (no precision hint): ran as {effective} on this "
                f"{device}{suffix}", True)
    if effective == requested:
        return requested + (suffix if mixed else ""), True
    native = _NATIVE.get(requested)
    if capabilities and native and native not in capabilities:
        why = (f"this {device} has no native {requested} (OpenVINO {device} capabilities: "
               f"{', '.join(capabilities)})")
    else:
        why = "OpenVINO did not apply it"
    return f"{requested} requested; {why}: ran as {effective}{suffix}", False
