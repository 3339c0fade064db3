"""The `custom_ops:` section: an operator no standard ONNX opset has, declared once.

A declaration names the ONNX node (op type = the key, `domain`, `version`), the
PyTorch op it comes from, its ONNX schema, how it is exported, and one kernel
or a decomposition per backend. Schema only: nothing here imports torch, onnx
or a kernel file (edgebuild/customops/ does that inside the stages).
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from edgebuild.recipe.common import FileRef, Strict

CALLABLE = r"^[^:\s]+:[A-Za-z_][\w.]*$"
OP_TYPE = r"^[A-Za-z_][A-Za-z0-9_]*$"
# Domains the runtimes reserve for their own ops: a custom node there would be
# taken for (or clash with) a built-in one.
RESERVED_DOMAINS = ("", "ai.onnx", "ai.onnx.ml", "ai.onnx.contrib", "com.microsoft")

AttributeType = Literal["int", "float", "string", "ints", "floats"]
ElementType = Literal["float32", "float16", "int8", "uint8", "int32", "int64", "bool"]


def _callable(value: str | None, what: str) -> str | None:
    if value is not None and not re.match(CALLABLE, value):
        raise ValueError(f"{what} '{value}' names no callable: write "
                         "`package.module:name` or `path/to/file.py:name`")
    return value


class ExportMode(StrEnum):
    """What export-onnx writes for the op."""

    CUSTOM = "custom"  # one node in the declared domain; each backend brings a kernel
    DECOMPOSE = "decompose"  # the `decomposition`: standard ONNX ops every backend reads


DECOMPOSE = "decompose"


class OpSignature(Strict):
    """The op's ONNX schema (registered with `onnx.defs`): tensors, then attributes.

    The checker and shape inference then read the custom node like a standard one.
    The PyTorch op takes the tensor inputs first, then the attributes, in the order
    written here.
    """

    inputs: list[str] = Field(min_length=1, description="Tensor input names, in order.")
    outputs: list[str] = Field(min_length=1, description="Output names, in order.")
    types: list[ElementType] = Field(
        default_factory=lambda: list[ElementType](["float32"]), min_length=1,
        description="Element types every input and output may have (one type constraint "
        "`T`, shared: the op computes in its inputs' type).")
    attributes: dict[str, AttributeType] = Field(
        default_factory=dict, description="Attribute name -> int, float, string, ints or "
        "floats; the PyTorch op takes them after its tensors, in this order.")
    output_shape: Literal["same_as_first_input", "unknown"] = Field(
        "same_as_first_input", description="The shape the exporter records for each output: "
        "that of the first input, or none (shape inference stops at the node).")

    @model_validator(mode="after")
    def _unique_names(self) -> OpSignature:
        names = [*self.inputs, *self.outputs, *self.attributes]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"names used twice in the schema: {', '.join(repeated)}")
        return self


class OrtKernel(Strict):
    """An ONNX Runtime kernel: a Python function or a compiled custom-op library."""

    python: str | None = Field(
        None, description="`path/to/file.py:fn` or `module:fn`: fn(*inputs, **attributes) on "
        "numpy arrays. Runs in domain ai.onnx.contrib (onnxruntime-extensions' only one): "
        "edgebuild renames the node's domain for the ONNX Runtime session alone.")
    library: FileRef | None = Field(
        None, description="A shared library registered with `register_custom_ops_library`; "
        "it must register the op in the declared domain.")

    @model_validator(mode="after")
    def _exactly_one(self) -> OrtKernel:
        if (self.python is None) == (self.library is None):
            raise ValueError("give exactly one of `python` or `library`")
        _callable(self.python, "python")
        return self


class OpenVinoKernel(Strict):
    """An OpenVINO kernel: a conversion onto OpenVINO's own ops, used by convert_model."""

    conversion: str = Field(
        description="`path/to/file.py:fn` or `module:fn`: fn(node) -> outputs, an "
        "openvino.frontend.onnx ConversionExtension body built from openvino.opsetN ops. "
        "The IR holds only built-in ops, so it loads anywhere without the file.")

    @model_validator(mode="after")
    def _names_a_callable(self) -> OpenVinoKernel:
        _callable(self.conversion, "conversion")
        return self


class Kernels(Strict):
    """Per backend: a kernel, `decompose` (the op's `decomposition`), or nothing.

    With `export: custom`, a target whose backend has nothing here is a validation
    error at the op's `kernels:` line.
    """

    onnxruntime: OrtKernel | Literal["decompose"] | None = Field(
        None, description="`{python: file.py:fn}`, `{library: lib.so}` or `decompose`.")
    openvino: OpenVinoKernel | Literal["decompose"] | None = Field(
        None, description="`{conversion: file.py:fn}` or `decompose`.")
    tflite: Literal["decompose"] | None = Field(
        None, description="onnx2tf has no custom-op hook: only `decompose`.")
    qnn: Literal["decompose"] | None = Field(
        None, description="A QNN op package is not supported: only `decompose`.")
    tensorrt: Literal["decompose"] | None = Field(
        None, description="An IPluginV3 plugin is not supported yet: only `decompose`.")

    def get(self, backend: str) -> Any:
        return getattr(self, backend, None)


class CustomOp(Strict):
    """An operator outside the standard ONNX opsets; the key is its ONNX op type."""

    domain: str = Field(
        pattern=r"^[A-Za-z][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)*$",
        description="ONNX domain of the custom node, e.g. `com.example.research`.")
    version: int = Field(1, ge=1, le=1000, description="The domain's opset version.")
    torch_op: str = Field(
        description="The `torch.library.custom_op` the model calls, or an `nn.Module` class "
        "without weights whose instances are the op (attributes read from the instance): "
        "`path/to/file.py:name` or `module:name`; the FP32 reference runs it.")
    onnx_schema: OpSignature = Field(
        description="Inputs, outputs, types and attributes of the ONNX node.")
    export: ExportMode = Field(
        ExportMode.CUSTOM, description="`custom`: one node in `domain` (every backend needs a "
        "kernel or `decompose`); `decompose`: the `decomposition` for every backend.")
    decomposition: str | None = Field(
        None, description="`path/to/file.py:fn` or `module:fn`: a legacy-exporter symbolic "
        "fn(g, *inputs, **attributes) that builds the op from standard ONNX ops with "
        "`g.op(...)`.")
    kernels: Kernels = Field(default_factory=Kernels)

    @field_validator("domain")
    @classmethod
    def _not_reserved(cls, domain: str) -> str:
        if domain in RESERVED_DOMAINS:
            raise ValueError(f"domain '{domain}' belongs to a runtime's own ops; "
                             "use your own, e.g. com.example.research")
        return domain

    @model_validator(mode="after")
    def _decomposition_given(self) -> CustomOp:
        _callable(self.torch_op, "torch_op")
        _callable(self.decomposition, "decomposition")
        wants = [b for b in Kernels.model_fields if self.kernels.get(b) == DECOMPOSE]
        if self.decomposition is None and (self.export is ExportMode.DECOMPOSE or wants):
            who = "`export: decompose`" if self.export is ExportMode.DECOMPOSE else \
                f"kernels {', '.join(wants)}: decompose"
            raise ValueError(f"{who} needs `decomposition:` (a symbolic building the op "
                             "from standard ONNX ops)")
        ort = self.kernels.onnxruntime
        lists = [a for a, kind in self.onnx_schema.attributes.items() if kind.endswith("s")
                 and kind != "string"]
        if isinstance(ort, OrtKernel) and ort.python is not None and lists:
            raise ValueError(f"attributes {', '.join(lists)}: onnxruntime-extensions' Python "
                             "kernels take only int, float and string attributes")
        return self

    def decomposes_for(self, backend: str) -> bool:
        """Whether a build for `backend` gets the decomposition instead of the node."""
        return self.export is ExportMode.DECOMPOSE or self.kernels.get(backend) == DECOMPOSE


def check_op_types(ops: dict[str, CustomOp]) -> dict[str, CustomOp]:
    for name in ops:
        if not re.match(OP_TYPE, str(name)):
            raise ValueError(f"custom op name '{name}' is not an ONNX op type: use letters, "
                             "digits and _, starting with a letter")
    return ops


# Backends that read PyTorch, not ONNX: an ONNX kernel or decomposition means nothing
# to them.
TORCH_BACKENDS = {"coreml": "a Core ML MIL composition (coremltools register_torch_op) is "
                            "not supported yet"}


def missing_kernel(op: CustomOp, backend: str) -> str:
    """'' when a build for `backend` can carry `op`, else what is missing (a phrase);
    decided at plan time, from the declaration alone."""
    if backend in TORCH_BACKENDS:
        return f"cannot be built for backend '{backend}': {TORCH_BACKENDS[backend]}"
    if op.export is ExportMode.DECOMPOSE:
        return ""
    if op.kernels.get(backend) is None:
        return f"has no kernel or decomposition for backend '{backend}'"
    return ""  # a kernel, or DECOMPOSE (CustomOp checked that `decomposition:` is given)
