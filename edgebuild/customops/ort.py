"""ONNX Runtime sessions that know the declared custom ops.

Every place edgebuild opens a session on a model that may hold a custom node
(the export check, onnx-optimize, the backend's compile and runner) goes
through `session()`. With no custom node in the graph it is a plain session.

A Python kernel is an onnxruntime-extensions `onnx_op`, and those live in the
one domain `ai.onnx.contrib` whatever they are declared with. The model keeps
the recipe's domain (OpenVINO's extension matches on it, and another runtime
should not see a node claiming to be onnxruntime-extensions'); only the copy
handed to the ONNX Runtime session is renamed, in memory. A compiled library
registers its ops in the declared domain itself, so its nodes are left alone.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from edgebuild.customops.declared import Declared, active
from edgebuild.errors import BackendUnavailable, StageError
from edgebuild.recipe.custom_ops import DECOMPOSE, CustomOp, OrtKernel

CONTRIB = "ai.onnx.contrib"  # the only domain onnxruntime-extensions' Python ops run in
_registered: dict[str, int] = {}  # op type -> id of the function registered for it


def custom_nodes(model: Any, declared: Declared | None = None) -> dict[str, CustomOp]:
    """The declared ops the graph uses (op type -> declaration); unknown custom
    domains are left to the runtime to refuse."""
    declared = declared if declared is not None else active()
    found = {}
    for node in model.graph.node:
        op = declared.find(node.op_type, node.domain)
        if op is not None:
            found[node.op_type] = op
    return found


def missing_kernels(model: Any) -> list[str]:
    """Custom ops of `model` that have no ONNX Runtime kernel."""
    return sorted(name for name, op in custom_nodes(model).items()
                  if not isinstance(op.kernels.onnxruntime, OrtKernel))


def session(model: Path | Any, options: Any = None, providers: list[str] | None = None) -> Any:
    """An InferenceSession for `model` (a path or a ModelProto) with the kernels of the
    custom ops it uses registered."""
    import onnx
    import onnxruntime as ort

    options = options if options is not None else ort.SessionOptions()
    providers = providers or ["CPUExecutionProvider"]
    declared = active()
    if not declared:
        source = str(model) if isinstance(model, Path) else model.SerializeToString()
        return ort.InferenceSession(source, options, providers=providers)
    proto = onnx.load(str(model)) if isinstance(model, Path) else model
    used = custom_nodes(proto, declared)
    if used:
        proto = _with_kernels(proto, used, declared, options)
    return ort.InferenceSession(proto.SerializeToString(), options, providers=providers)


def _with_kernels(proto: Any, used: dict[str, CustomOp], declared: Declared,
                  options: Any) -> Any:
    import onnx

    from edgebuild.recipe.files import resolve_file

    renamed: dict[str, str] = {}  # op type -> its declared domain, renamed to CONTRIB
    python = False
    for name, op in used.items():
        kernel = op.kernels.onnxruntime
        if not isinstance(kernel, OrtKernel):
            how = "is decomposed for it" if kernel == DECOMPOSE else "has none"
            raise StageError(f"the model holds custom op '{op.domain}::{name}' and ONNX Runtime "
                             f"has no kernel for it (kernels.onnxruntime {how})",
                             "add `kernels.onnxruntime: {python: file.py:fn}` or `{library: "
                             "lib.so}` to the op in `custom_ops:`")
        if kernel.library is not None:
            path = resolve_file(kernel.library, declared.base_dir)
            if not path.is_file():
                raise StageError(f"custom op '{name}': kernels.onnxruntime.library {path} "
                                 "not found")
            options.register_custom_ops_library(str(path))
            continue
        assert kernel.python is not None
        _register_python(name, op, declared.load(kernel.python))
        renamed[name] = op.domain
        python = True
    if python:
        options.register_custom_ops_library(_extensions_library())
    if not renamed:
        return proto
    copy = onnx.ModelProto()
    copy.CopyFrom(proto)
    for node in copy.graph.node:
        if renamed.get(node.op_type) == node.domain:
            node.domain = CONTRIB
    domains = {i.domain for i in copy.opset_import}
    if CONTRIB not in domains:
        copy.opset_import.append(onnx.helper.make_opsetid(CONTRIB, 1))
    return copy


def _extensions_library() -> str:
    try:
        from onnxruntime_extensions import get_library_path
    except ImportError as exc:
        raise BackendUnavailable("onnxruntime", "onnxruntime-extensions, which runs Python "
                                 "kernels of custom ops, cannot be imported",
                                 "onnxruntime") from exc
    return str(get_library_path())


_ATTRIBUTE_TYPES = {"int": "dt_int64", "float": "dt_float", "string": "dt_string"}
_ELEMENT_TYPES = {"float32": "dt_float", "float16": "dt_float16", "int8": "dt_int8",
                  "uint8": "dt_uint8", "int32": "dt_int32", "int64": "dt_int64",
                  "bool": "dt_bool"}


def _register_python(name: str, op: CustomOp, function: Any) -> None:
    """Declare `function` as the kernel of op type `name` (once per process: the
    extensions library keeps one function per op type)."""
    from onnxruntime_extensions import PyCustomOpDef, onnx_op

    if _registered.get(name) == id(function):
        return
    if not callable(function):
        raise StageError(f"custom op '{name}': kernels.onnxruntime.python is not callable")
    sig = op.onnx_schema
    element = getattr(PyCustomOpDef, _ELEMENT_TYPES[sig.types[0]])
    onnx_op(op_type=name, inputs=[element] * len(sig.inputs),
            outputs=[element] * len(sig.outputs),
            attrs={a: getattr(PyCustomOpDef, _ATTRIBUTE_TYPES[kind])
                   for a, kind in sig.attributes.items()})(function)
    _registered[name] = id(function)


def save_optimized(options: Any, source: Path, destination: Path,
                   providers: list[str] | None = None) -> None:
    """Let ONNX Runtime optimize `source` into `destination` (its `optimized_model_filepath`),
    the custom nodes written back in their declared domains."""
    import onnx

    options.optimized_model_filepath = str(destination)
    session(source, options, providers)
    if not _registered:
        return
    model = onnx.load(str(destination))
    declared = active()
    changed = False
    for node in model.graph.node:
        op = declared.ops.get(node.op_type)
        if node.domain == CONTRIB and op is not None and node.op_type in _registered:
            node.domain = op.domain
            changed = True
    if changed:
        if not any(n.domain == CONTRIB for n in model.graph.node):
            kept = [i for i in model.opset_import if i.domain != CONTRIB]
            del model.opset_import[:]
            model.opset_import.extend(kept)
        for domain, version in declared.domains().items():
            if not any(i.domain == domain for i in model.opset_import):
                model.opset_import.append(onnx.helper.make_opsetid(domain, version))
        onnx.save(model, str(destination))
