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

A Python kernel that raises cannot be allowed to raise into onnxruntime-extensions:
it turns the exception into `std::terminate`, and the stage died as "killed by
SIGABRT" with the cause only deep in its log. Each kernel is therefore guarded: an
exception (or a result that is not one array per output) is printed to the stage
log and recorded, the kernel returns placeholders, and the session's `run` raises a
`StageError` naming the op, the kernel and the exception.
"""

from __future__ import annotations

import functools
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from edgebuild.customops.declared import Declared, active
from edgebuild.errors import BackendUnavailable, StageError
from edgebuild.recipe.custom_ops import DECOMPOSE, CustomOp, OrtKernel

CONTRIB = "ai.onnx.contrib"  # the only domain onnxruntime-extensions' Python ops run in
_registered: dict[str, int] = {}  # op type -> id of the function registered for it
_failures: list[tuple[str, str, str]] = []  # (op type, kernel, error) of the current run


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
    kind: Any = ort.InferenceSession
    if used:
        proto, python = _with_kernels(proto, used, declared, options)
        if python:
            kind = _checked_session()
    return kind(proto.SerializeToString(), options, providers=providers)


def _with_kernels(proto: Any, used: dict[str, CustomOp], declared: Declared,
                  options: Any) -> tuple[Any, bool]:
    """The model for the session (Python-kernel nodes renamed to CONTRIB), and whether a
    Python kernel is registered."""
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
        _register_python(name, op, kernel.python, declared.load(kernel.python))
        renamed[name] = op.domain
        python = True
    if python:
        options.register_custom_ops_library(_extensions_library())
    if not renamed:
        return proto, python
    copy = onnx.ModelProto()
    copy.CopyFrom(proto)
    for node in copy.graph.node:
        if renamed.get(node.op_type) == node.domain:
            node.domain = CONTRIB
    domains = {i.domain for i in copy.opset_import}
    if CONTRIB not in domains:
        copy.opset_import.append(onnx.helper.make_opsetid(CONTRIB, 1))
    return copy, python


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


def _register_python(name: str, op: CustomOp, ref: str, function: Any) -> None:
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
                   for a, kind in sig.attributes.items()}
            )(_guarded(name, ref, function, len(sig.outputs)))
    _registered[name] = id(function)


def _guarded(name: str, ref: str, function: Callable[..., Any], outputs: int
             ) -> Callable[..., Any]:
    """`function`, never raising into ONNX Runtime: a failure is logged and recorded, and
    placeholders (zeros shaped like the first input) keep the graph running until `run`
    raises it."""
    import numpy as np

    @functools.wraps(function)
    def kernel(*inputs: Any, **attributes: Any) -> Any:
        try:
            result = function(*inputs, **attributes)
            arrays = result if isinstance(result, tuple) else (result,)
            if len(arrays) != outputs or not all(
                    isinstance(a, np.ndarray | np.generic) for a in arrays):
                got = (f"a tuple of {', '.join(type(a).__name__ for a in arrays)}"
                       if isinstance(result, tuple) else type(result).__name__)
                raise TypeError(f"the kernel returned {got}; the op has {outputs} "
                                f"output{'s' if outputs > 1 else ''}: return "
                                + ("one numpy array" if outputs == 1
                                   else f"a tuple of {outputs} numpy arrays"))
            return result
        except Exception as exc:  # whatever the user's kernel raises: reported by `run`
            print(f"custom op '{name}': kernel {ref} raised:", file=sys.stderr)
            traceback.print_exc()
            text = f"{type(exc).__name__}: {exc}"
            _failures.append((name, ref, text if len(text) <= 500 else text[:497] + "..."))
            placeholder = (np.zeros_like(inputs[0]) if inputs
                           else np.zeros(0, dtype=np.float32))
            return placeholder if outputs == 1 else tuple(placeholder for _ in range(outputs))

    return kernel


@functools.cache
def _checked_session() -> type:
    """An InferenceSession whose `run` raises what a guarded Python kernel recorded."""
    import onnxruntime as ort

    class CheckedSession(ort.InferenceSession):  # type: ignore[misc]
        def run(self, *args: Any, **kwargs: Any) -> Any:
            del _failures[:]
            try:
                result = super().run(*args, **kwargs)
            except Exception as exc:  # a consequence of the placeholders, if one failed
                if _failures:
                    raise _kernel_error() from exc
                raise
            if _failures:
                raise _kernel_error()
            return result

    return CheckedSession


def _kernel_error() -> StageError:
    name, ref, error = _failures[0]
    more = f" (and {len(_failures) - 1} more calls)" if len(_failures) > 1 else ""
    del _failures[:]
    return StageError(f"custom op '{name}': its ONNX Runtime kernel {ref} raised {error}{more}",
                      "the kernel's traceback is in the stage log; it is called with the "
                      "node's inputs as numpy arrays (attributes as keyword arguments) and "
                      "returns one array per output")


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
