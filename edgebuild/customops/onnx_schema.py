"""Register each declared op's schema with `onnx.defs`.

Without a schema, `onnx.checker` cannot check a custom node's inputs, types and
attributes, and shape inference stops at it; with one, both work on the graph
as on any standard op (the dynamo exporter even refuses a custom-domain node
whose schema is unknown).
"""

from __future__ import annotations

from typing import Any

from edgebuild.recipe.custom_ops import CustomOp

ONNX_TYPES = {"float32": "float", "float16": "float16", "int8": "int8", "uint8": "uint8",
              "int32": "int32", "int64": "int64", "bool": "bool"}


def op_schema(name: str, op: CustomOp) -> Any:
    """The `onnx.defs.OpSchema` of one declaration."""
    from onnx import defs

    sig = op.onnx_schema
    attr_types = {"int": defs.OpSchema.AttrType.INT, "float": defs.OpSchema.AttrType.FLOAT,
                  "string": defs.OpSchema.AttrType.STRING, "ints": defs.OpSchema.AttrType.INTS,
                  "floats": defs.OpSchema.AttrType.FLOATS}
    return defs.OpSchema(
        name, op.domain, op.version,
        doc=f"Custom op declared in an edgebuild recipe (torch op {op.torch_op}).",
        inputs=[defs.OpSchema.FormalParameter(i, "T") for i in sig.inputs],
        outputs=[defs.OpSchema.FormalParameter(o, "T") for o in sig.outputs],
        type_constraints=[("T", [f"tensor({ONNX_TYPES[t]})" for t in sig.types],
                           "the element types the op computes in")],
        attributes=[defs.OpSchema.Attribute(a, attr_types[kind], "", required=True)
                    for a, kind in sig.attributes.items()],
    )


def register(ops: dict[str, CustomOp]) -> list[str]:
    """Register every op's schema in this process (again if its declaration changed);
    returns `domain::name` of each."""
    from onnx import defs

    done = []
    for name, op in ops.items():
        schema = op_schema(name, op)
        if defs.has(name, op.version, op.domain):
            current = defs.get_schema(name, op.version, op.domain)
            if _same(current, schema):
                done.append(f"{op.domain}::{name}")
                continue
            defs.deregister_schema(name, op.version, op.domain)
        defs.register_schema(schema)
        done.append(f"{op.domain}::{name}")
    return done


def _same(a: Any, b: Any) -> bool:
    return bool(
        [i.name for i in a.inputs] == [i.name for i in b.inputs]
        and [o.name for o in a.outputs] == [o.name for o in b.outputs]
        and sorted(a.attributes) == sorted(b.attributes)
        and [sorted(c.allowed_type_strs) for c in a.type_constraints]
        == [sorted(c.allowed_type_strs) for c in b.type_constraints])
