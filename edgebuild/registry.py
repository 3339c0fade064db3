"""The one table of passes and backends: name -> where its code lives + pip extra.

Nothing here imports a pass or backend until it is asked for, and pass and
backend modules themselves import their vendor libraries only inside the
methods that need them, so validating and planning stay light. Third-party
packages add entries through the `edgebuild.passes` / `edgebuild.backends`
entry-point groups (docs/extending.md).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from functools import cache
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any

from edgebuild.errors import BackendUnavailable, PlanError, did_you_mean

if TYPE_CHECKING:
    from edgebuild.backends.base import Backend
    from edgebuild.passes.base import Op


@dataclass(frozen=True)
class PassEntry:
    ref: str  # "module:Class"
    summary: str
    extra: str | None = None


@dataclass(frozen=True)
class BackendEntry:
    summary: str
    accepts: tuple[str, ...]  # artifact formats its compiler takes
    produces: str  # format of the compiled artifact
    extra: str | None = None
    ref: str | None = None  # None: not implemented in this version
    tracking: str = ""  # where the missing implementation is tracked

    @property
    def implemented(self) -> bool:
        return self.ref is not None


PASSES: dict[str, PassEntry] = {
    "export-onnx": PassEntry(
        "edgebuild.passes.export_onnx:ExportOnnx",
        "PyTorch -> ONNX with torch.onnx.export, checked against PyTorch on sample inputs",
    ),
    "onnx-optimize": PassEntry(
        "edgebuild.passes.onnx_optimize:OnnxOptimize",
        "shape inference, constant folding, simplification, portable ORT graph optimization",
    ),
    "onnx-to-tf": PassEntry(
        "edgebuild.passes.onnx_to_tf:OnnxToTf",
        "ONNX (NCHW) -> TensorFlow SavedModel (NHWC) with onnx2tf; inserted before TFLite",
        extra="tflite",
    ),
    "openvino-quantize": PassEntry(
        "edgebuild.passes.openvino_quantize:OpenVinoQuantize",
        "ONNX -> INT8 OpenVINO IR with NNCF post-training quantization (optionally "
        "accuracy-controlled)", extra="openvino",
    ),
    "prune": PassEntry(
        "edgebuild.passes.prune:Prune",
        "structured L1/L2 filter pruning that removes channels (PyTorch, before export)",
    ),
    "quantize": PassEntry(
        "edgebuild.passes.quantize:Quantize",
        "INT8 (dynamic, or static QDQ with calibration; accuracy-aware) or FP16",
    ),
}

# Internal stage operations the planner adds around the passes.
OPS: dict[str, str] = {
    "import-onnx": "edgebuild.passes.import_onnx:ImportOnnx",
    "compile": "edgebuild.passes.compile:Compile",
    "reference": "edgebuild.gates.reference:Reference",
    "infer": "edgebuild.gates.accuracy:Infer",
    "measure-latency": "edgebuild.gates.latency:MeasureLatency",
    "compare-latency": "edgebuild.gates.compare_latency:CompareLatency",
    "select": "edgebuild.gates.select:Select",
}

BACKENDS: dict[str, BackendEntry] = {
    "onnxruntime": BackendEntry(
        "ONNX Runtime (CPU execution provider)", ("onnx",), "onnx",
        ref="edgebuild.backends.onnxruntime:OnnxRuntimeBackend",
    ),
    "openvino": BackendEntry(
        "Intel OpenVINO IR", ("onnx", "openvino-ir"), "openvino-ir", extra="openvino",
        ref="edgebuild.backends.openvino:OpenVinoBackend",
    ),
    "tflite": BackendEntry(
        "TensorFlow Lite / LiteRT (host interpreter here; phones over adb)",
        ("tf-savedmodel",), "tflite", extra="tflite",
        ref="edgebuild.backends.tflite:TfliteBackend",
    ),
    "coreml": BackendEntry(
        "Apple Core ML .mlpackage via coremltools", ("pytorch", "onnx"), "mlpackage",
        extra="coreml", tracking="a future Core ML backend issue",
    ),
    "tensorrt": BackendEntry(
        "NVIDIA TensorRT engine (explicit QDQ INT8)", ("onnx",), "tensorrt-engine",
        extra="tensorrt", tracking="a future TensorRT backend issue",
    ),
    "qnn": BackendEntry(
        "Qualcomm QNN context binary via onnxruntime-qnn", ("onnx",), "qnn-context",
        extra="qnn", tracking="a future QNN backend issue",
    ),
}


def _import_ref(ref: str) -> Any:
    module_name, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module_name), attr)


@cache
def _plugin_entries(group: str) -> dict[str, Any]:
    return {ep.name: ep for ep in entry_points(group=group)}


def pass_names() -> list[str]:
    return sorted({*PASSES, *_plugin_entries("edgebuild.passes")})


def load_op(name: str) -> type[Op]:
    """The class of a pass or internal op; PlanError with a suggestion if unknown."""
    if name in OPS:
        return _import_ref(OPS[name])  # type: ignore[no-any-return]
    if name in PASSES:
        return _import_ref(PASSES[name].ref)  # type: ignore[no-any-return]
    plugin = _plugin_entries("edgebuild.passes").get(name)
    if plugin is not None:
        return plugin.load()  # type: ignore[no-any-return]
    raise PlanError(f"unknown pass '{name}'",
                    did_you_mean(name, pass_names()) or "see `edgebuild passes`")


def backend_entry(name: str) -> BackendEntry:
    if name in BACKENDS:
        return BACKENDS[name]
    plugin = _plugin_entries("edgebuild.backends").get(name)
    if plugin is not None:
        cls = plugin.load()
        return BackendEntry(cls.summary, tuple(cls.accepts), cls.produces,
                            ref=f"{cls.__module__}:{cls.__qualname__}")
    names = sorted({*BACKENDS, *_plugin_entries("edgebuild.backends")})
    raise PlanError(f"unknown backend '{name}'", did_you_mean(name, names)
                    or f"known backends: {', '.join(names)}")


def load_backend(name: str) -> Backend:
    """An instance of a backend; BackendUnavailable if it is not implemented."""
    entry = backend_entry(name)
    if entry.ref is None:
        raise BackendUnavailable(
            name, f"not implemented in this version of edgebuild ({entry.tracking})",
            entry.extra,
        )
    backend: Backend = _import_ref(entry.ref)()
    return backend


def backend_tools(name: str) -> tuple[str, ...]:
    """Distributions whose versions enter the key of a stage run by this backend."""
    return load_backend(name).tools if backend_entry(name).implemented else ()
