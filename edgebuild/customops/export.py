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


def torch_qualname(name: str, op: CustomOp, declared: Declared) -> str:
    """`namespace::name` of the declared torch op, its signature checked against the
    schema (tensors first, then the attributes, by name)."""
    found = declared.load(op.torch_op)
    qualname = getattr(found, "_qualname", None)  # a torch.library.custom_op
    overload = getattr(found, "_opoverload", None)
    if not isinstance(qualname, str) or overload is None:
        raise StageError(f"custom op '{name}': torch_op '{op.torch_op}' is a "
                         f"{type(found).__name__}, not a torch.library.custom_op",
                         "decorate the function with @torch.library.custom_op(...)")
    arguments = [a.name for a in overload._schema.arguments]
    expected = [*op.onnx_schema.inputs, *op.onnx_schema.attributes]
    if arguments != expected:
        raise StageError(f"custom op '{name}': torch op {qualname} takes ({', '.join(arguments)})"
                         f", the schema declares ({', '.join(expected)})",
                         "onnx_schema.inputs then onnx_schema.attributes must name the torch "
                         "op's arguments in order")
    return qualname


def register_symbolics(declared: Declared, opset: int, decompose: set[str]) -> dict[str, str]:
    """Register a symbolic per declared op; returns torch op -> what it exports as."""
    import torch

    exported = {}
    for name, op in declared.ops.items():
        qualname = torch_qualname(name, op, declared)
        if name in decompose or op.export.value == "decompose":
            assert op.decomposition is not None  # CustomOp checked it
            symbolic = _decomposing(name, op, declared.load(op.decomposition))
            exported[qualname] = f"decomposition {op.decomposition}"
        else:
            symbolic = _custom_node(name, op)
            exported[qualname] = f"{op.domain}::{name}"
        torch.onnx.register_custom_op_symbolic(  # type: ignore[attr-defined]
            qualname, symbolic, opset)
    return exported


def custom_opsets(declared: Declared, decompose: set[str]) -> dict[str, int]:
    """The exporter's `custom_opsets`: the domains of the ops exported as nodes."""
    return {op.domain: op.version for name, op in declared.ops.items()
            if name not in decompose and op.export.value == "custom"}


def _split(name: str, op: CustomOp, args: tuple[Any, ...]) -> tuple[list[Any], dict[str, Any]]:
    """(tensor inputs, attribute name -> Python value) of one call."""
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
    outputs = len(op.onnx_schema.outputs)

    def symbolic(g: Any, *args: Any) -> Any:
        tensors, attributes = _split(name, op, args)
        written = {f"{a}_{_CONST[op.onnx_schema.attributes[a]][1]}": v
                   for a, v in attributes.items()}
        result = g.op(f"{op.domain}::{name}", *tensors, outputs=outputs, **written)
        values = list(result) if outputs > 1 else [result]
        if op.onnx_schema.output_shape == "same_as_first_input":
            for value in values:
                value.setType(tensors[0].type())
        return result

    return symbolic


def _decomposing(name: str, op: CustomOp, decomposition: Any) -> Any:
    def symbolic(g: Any, *args: Any) -> Any:
        tensors, attributes = _split(name, op, args)
        return decomposition(g, *tensors, **attributes)

    return symbolic


_UNREGISTERED = re.compile(r"unrecognized namespace ([\w.]+::[\w.]+)|"
                           r"[Ee]xporting the operator '?([\w.]+::[\w.]+)'? to ONNX")


def unregistered_op(exc: Exception) -> str:
    """The torch op an exporter error says has no symbolic, or ''."""
    found = _UNREGISTERED.search(str(exc))
    return next((g.rstrip(".") for g in found.groups() if g), "") if found else ""
