"""The legacy (TorchScript) exporter's symbolics for the declared ops.

For each op the exporter gets one symbolic, registered with
`torch.onnx.register_custom_op_symbolic` under the torch op's qualified name:

- `custom`: generated from the declared schema, it writes one node
  `domain::OpType` with the tensors as inputs and the rest as attributes;
- `decompose`: the recipe's `decomposition`, called as
  fn(g, *inputs, **attributes), builds the op from standard ONNX ops.

The attributes reach a symbolic as graph constants; they are read back as
Python values here, so a decomposition sees plain ints and floats.
"""

from __future__ import annotations

import re
from typing import Any

from edgebuild.customops.declared import Declared
from edgebuild.errors import StageError
from edgebuild.recipe.custom_ops import CustomOp

# What `symbolic_helper._maybe_get_const` reads, and the suffix `g.op` wants.
_CONST = {"int": ("i", "i"), "float": ("f", "f"), "string": ("s", "s"), "ints": ("is", "i"),
          "floats": ("fs", "f")}


def torch_qualname(name: str, op: CustomOp, found: Any) -> str:
    """`namespace::name` of a declared `torch.library.custom_op`, its signature checked
    against the schema (tensors first, then the attributes, by name)."""
    qualname = getattr(found, "_qualname", None)
    overload = getattr(found, "_opoverload", None)
    if not isinstance(qualname, str) or overload is None:
        raise StageError(f"custom op '{name}': torch_op '{op.torch_op}' is a "
                         f"{type(found).__name__}, neither a torch.library.custom_op nor a "
                         "torch.nn.Module class",
                         "decorate the function with @torch.library.custom_op(...), or name "
                         "the module class")
    _same_arguments(name, op, qualname, [a.name for a in overload._schema.arguments],
                    [*op.onnx_schema.inputs, *op.onnx_schema.attributes])
    return qualname


def _same_arguments(name: str, op: CustomOp, what: str, arguments: list[str],
                    expected: list[str]) -> None:
    if arguments != expected:
        raise StageError(f"custom op '{name}': {what} takes ({', '.join(arguments)}), the "
                         f"schema declares ({', '.join(expected)})",
                         "onnx_schema.inputs (then, for a custom_op, onnx_schema.attributes) "
                         "must name its arguments in order")


def register_symbolics(declared: Declared, opset: int, decompose: set[str],
                       model: Any) -> dict[str, str]:
    """Make the exporter write each declared op as a node or its decomposition; returns
    torch op (or module class) -> what it exports as.

    A `torch.library.custom_op` gets a symbolic registered under its name; the
    instances of a module class in `model` get their forward wrapped in an
    autograd.Function whose `symbolic` writes the same thing (the legacy exporter's
    hook for Python code it cannot see through).
    """
    import torch

    exported = {}
    for name, op in declared.ops.items():
        found = declared.load(op.torch_op)
        decomposes = name in decompose or op.export.value == "decompose"
        if decomposes:
            assert op.decomposition is not None  # CustomOp checked it
            emit = _decomposing(declared.load(op.decomposition))
            written = f"decomposition {op.decomposition}"
        else:
            emit, written = _custom_node(name, op), f"{op.domain}::{name}"
        if isinstance(found, type) and issubclass(found, torch.nn.Module):
            count = _wrap_modules(name, op, found, model, emit)
            exported[f"{found.__module__}.{found.__qualname__}"] = f"{written} ({count}x)"
            continue
        qualname = torch_qualname(name, op, found)

        def symbolic(g: Any, *args: Any, _name: str = name, _op: CustomOp = op,
                     _emit: Any = emit) -> Any:
            return _emit(g, *_split(_name, _op, args))

        torch.onnx.register_custom_op_symbolic(  # type: ignore[attr-defined]
            qualname, symbolic, opset)
        exported[qualname] = written
    return exported


def custom_opsets(declared: Declared, decompose: set[str]) -> dict[str, int]:
    """The exporter's `custom_opsets`: the domains of the ops exported as nodes."""
    return {op.domain: op.version for name, op in declared.ops.items()
            if name not in decompose and op.export.value == "custom"}


def _split(name: str, op: CustomOp, args: tuple[Any, ...]) -> tuple[list[Any], dict[str, Any]]:
    """(tensor inputs, attribute name -> Python value) of one custom_op call."""
    import torch
    from torch.onnx import symbolic_helper

    count = len(op.onnx_schema.inputs)
    attributes = {}
    for (attr, kind), value in zip(op.onnx_schema.attributes.items(), args[count:],
                                   strict=True):
        constant = symbolic_helper._maybe_get_const(value, _CONST[kind][0])  # type: ignore[arg-type]
        if isinstance(constant, torch._C.Value):
            raise StageError(f"custom op '{name}': attribute '{attr}' is not a constant in the "
                             "traced graph", "an attribute must not depend on the inputs")
        attributes[attr] = constant
    return list(args[:count]), attributes


def _custom_node(name: str, op: CustomOp) -> Any:
    """(g, tensors, attributes) -> the one node in the declared domain."""
    outputs = len(op.onnx_schema.outputs)

    def emit(g: Any, tensors: list[Any], attributes: dict[str, Any]) -> Any:
        written = {f"{a}_{_CONST[op.onnx_schema.attributes[a]][1]}": v
                   for a, v in attributes.items()}
        result = g.op(f"{op.domain}::{name}", *tensors, outputs=outputs, **written)
        values = list(result) if outputs > 1 else [result]
        if op.onnx_schema.output_shape == "same_as_first_input":
            for value in values:
                value.setType(tensors[0].type())
        return result

    return emit


def _decomposing(decomposition: Any) -> Any:
    def emit(g: Any, tensors: list[Any], attributes: dict[str, Any]) -> Any:
        return decomposition(g, *tensors, **attributes)

    return emit


def _wrap_modules(name: str, op: CustomOp, cls: Any, model: Any, emit: Any) -> int:
    """Route each `cls` instance in `model` through an autograd.Function that runs its
    forward in PyTorch and exports as `emit`; returns how many were wrapped."""
    import inspect

    import torch

    count = 0
    for path, module in model.named_modules():
        if not isinstance(module, cls):
            continue
        owned = [n for n, _ in [*module.named_parameters(), *module.named_buffers()]]
        if owned:
            raise StageError(f"custom op '{name}': module {path or 'model'} "
                             f"({cls.__name__}) holds weights {owned[:3]}, which a custom "
                             "node would not carry",
                             "make the weights inputs of the op (compute them outside the "
                             "module), or use a torch.library.custom_op")
        forward = module.forward
        parameters = [p.name for p in inspect.signature(forward).parameters.values()]
        _same_arguments(name, op, f"{cls.__name__}.forward", parameters,
                        list(op.onnx_schema.inputs))
        missing = [a for a in op.onnx_schema.attributes if not hasattr(module, a)]
        if missing:
            raise StageError(f"custom op '{name}': {cls.__name__} has no attribute "
                             f"{', '.join(missing)} (the schema's attributes are read from "
                             "the module)")
        attributes = {a: getattr(module, a) for a in op.onnx_schema.attributes}
        module.forward = _as_function(forward, emit, attributes, torch)
        count += 1
    return count


def _as_function(forward: Any, emit: Any, attributes: dict[str, Any], torch: Any) -> Any:
    class Wrapped(torch.autograd.Function):  # type: ignore[misc]
        @staticmethod
        def forward(ctx: Any, *tensors: Any) -> Any:
            return forward(*tensors)

        @staticmethod
        def symbolic(g: Any, *tensors: Any) -> Any:
            return emit(g, list(tensors), attributes)

    return lambda *tensors: Wrapped.apply(*tensors)


_UNREGISTERED = re.compile(r"unrecognized namespace ([\w.]+::[\w.]+)|"
                           r"[Ee]xporting the operator '?([\w.]+::[\w.]+)'? to ONNX")


def unregistered_op(exc: Exception) -> str:
    """The torch op an exporter error says has no symbolic, or ''."""
    found = _UNREGISTERED.search(str(exc))
    return next((g.rstrip(".") for g in found.groups() if g), "") if found else ""
