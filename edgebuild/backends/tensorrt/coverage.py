"""Which nodes of an ONNX model TensorRT's ONNX parser imports, from its support matrix.

Why: a TensorRT build needs an NVIDIA GPU and the TensorRT wheels; a reviewer wants to
know before that whether the model will parse, which nodes need a plugin, and which sit
on a documented restriction (a type the op does not take, an attribute value outside the
supported list, an input that must be an initializer). The verdicts come from the
parser's own table, transcribed in `parser_rules.py` with its commit and TensorRT
version; the table is per op, so "supported" means "the matrix lists this op for this
type and no checked restriction applies", not "TensorRT built it".

    coverage(model, trt_version)  ->  CoverageReport
        .rows         one CoverageRow per (domain, op, input type, verdict, note)
        .unsupported  the rows that need a plugin (or a type TensorRT has no tensors of)
        .summary      "N of M nodes supported; K need a plugin: ..."
        .markdown()   the table for the build report

Nodes inside If/Loop/Scan bodies and model-local functions are walked too: the parser
imports them the same way. `onnx` is imported inside the functions, so importing this
module (and the CLI) stays light.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from edgebuild.backends.tensorrt.parser_rules import (
    LATEST,
    TYPE_NOTES,
    Matrix,
    OpSupport,
    matrix_for,
)

ONNX_DOMAINS = ("", "ai.onnx")
PLUGIN = "needs a plugin"
# ONNX TensorProto type names -> the matrix's names.
_TYPE_NAMES = {"FLOAT": "FP32", "FLOAT16": "FP16", "BFLOAT16": "BF16", "FLOAT8E4M3FN": "FP8",
               "FLOAT4E2M1": "FP4"}
# Where an op's "type" is read, when it is not input 0 (-1: output 0).
_DATA_INPUT = {"Where": 1, "ConstantOfShape": -1, "Constant": -1}
_RESIZE = {
    "mode": ("nearest", ("nearest", "linear")),
    "coordinate_transformation_mode": ("half_pixel", (
        "half_pixel", "pytorch_half_pixel", "tf_half_pixel_for_nn", "asymmetric",
        "align_corners")),
    "keep_aspect_ratio_policy": ("stretch", ("stretch",)),
}
_NEAREST = ("floor", "ceil", "round_prefer_floor", "round_prefer_ceil")
_ACTIVATIONS_PER_DIRECTION = {"LSTM": 3, "GRU": 2, "RNN": 1}
# Restrictions the checks below decide completely (no "check:" note when they pass).
_FULLY_CHECKED = ("must be an initializer", "must be a constant tensor", "pooling only",
                  "dilations", "activation functions must be the same", "`reduction`",
                  "sparse_value", "Only the first output", "bidirectional")


class Verdict(StrEnum):
    SUPPORTED = "supported"
    RESTRICTED = "restricted"
    UNSUPPORTED = "unsupported"


@dataclass(frozen=True)
class CoverageRow:
    """One kind of node: same domain, op, data type and verdict; `examples` are node
    names (inside subgraphs: 'parent/attribute/name')."""

    domain: str
    op: str
    opset: int | None
    dtype: str
    count: int
    examples: tuple[str, ...]
    verdict: Verdict
    note: str


@dataclass(frozen=True)
class DynamicInput:
    """A graph input with symbolic or unknown dims: the engine needs a profile for it."""

    name: str
    shape: tuple[str, ...]


@dataclass
class CoverageReport:
    """The parser's verdict on every node of one model, against one matrix."""

    matrix: Matrix
    rows: list[CoverageRow]
    dynamic_inputs: list[DynamicInput] = field(default_factory=list)
    opset: int | None = None
    warnings: list[str] = field(default_factory=list)
    trt_version: str = ""  # as asked; the matrix may be an earlier release's

    @property
    def unsupported(self) -> list[CoverageRow]:
        return [r for r in self.rows if r.verdict is Verdict.UNSUPPORTED]

    @property
    def restricted(self) -> list[CoverageRow]:
        return [r for r in self.rows if r.verdict is Verdict.RESTRICTED]

    @property
    def nodes(self) -> int:
        return sum(r.count for r in self.rows)

    @property
    def summary(self) -> str:
        """One line: counts, the ops that need a plugin, restrictions, profiles."""
        supported = sum(r.count for r in self.rows if r.verdict is Verdict.SUPPORTED)
        parts = [f"{supported} of {self.nodes} nodes supported by the TensorRT "
                 f"{self.matrix.trt_version} ONNX parser"]
        if self.unsupported:
            n = sum(r.count for r in self.unsupported)
            parts.append(f"{n} need{'s' if n == 1 else ''} a plugin: {_ops(self.unsupported)}")
        if self.restricted:
            parts.append(f"{sum(r.count for r in self.restricted)} restricted: "
                         + _ops(self.restricted))
        if self.dynamic_inputs:
            shapes = ", ".join(f"{d.name}[{','.join(d.shape)}]" for d in self.dynamic_inputs)
            parts.append(f"dynamic input shapes {shapes}: the engine build needs an "
                         "optimization profile (min/opt/max) for them")
        return "; ".join(parts + self.warnings)

    def markdown(self) -> str:
        """The table, its one-line summary and the source it was decided from."""
        asked = self.trt_version or self.matrix.trt_version
        title = f"### TensorRT {asked} ONNX parser coverage"
        if asked != self.matrix.trt_version:
            title += f" (matrix of TensorRT {self.matrix.trt_version}, the newest at or below)"
        lines = [title, "",
                 self.summary + ".", "",
                 "| op | opset | types | count | verdict | note |", "|---|---|---|---|---|---|"]
        for r in self.rows:
            op = r.op if r.domain in ONNX_DOMAINS else f"{r.domain}::{r.op}"
            examples = ", ".join(r.examples)
            note = f"{r.note} (e.g. {examples})" if r.note else f"e.g. {examples}"
            cells = [op, "" if r.opset is None else str(r.opset), r.dtype, str(r.count),
                     r.verdict.value, note]
            lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
        lines += ["", f"Source: {self.matrix.source}; pinned by {self.matrix.pinned_by}. "
                  f"The matrix covers ai.onnx opsets {self.matrix.opset_min} to "
                  f"{self.matrix.opset_max}. \"supported\" means the matrix lists the op for "
                  "this type and no checked restriction applies; the builder can still "
                  "reject a layer for a GPU or precision."]
        return "\n".join(lines) + "\n"


def _ops(rows: list[CoverageRow]) -> str:
    counts: dict[str, int] = {}
    for r in rows:
        name = r.op if r.domain in ONNX_DOMAINS else f"{r.domain}::{r.op}"
        counts[name] = counts.get(name, 0) + r.count
    return ", ".join(f"{op} (x{n})" if n > 1 else op for op, n in counts.items())


def coverage(model: Any, trt_version: str = LATEST.trt_version) -> CoverageReport:
    """Decide every node of `model` (an onnx.ModelProto) against the matrix for
    `trt_version` (the newest matrix at or below it, see parser_rules.matrix_for)."""
    import onnx

    matrix = matrix_for(trt_version)
    warnings: list[str] = []
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception as error:  # a model the checker rejects still gets its table
        inferred = model
        warnings.append(f"shape inference failed ({type(error).__name__}): some types unknown")
    walk = _Walk(inferred, matrix)
    groups: dict[tuple[str, str, int | None, str, Verdict, str], list[str]] = {}
    for node, path, opsets in walk.nodes(inferred.graph, "", walk.opsets):
        verdict, note = walk.decide(node, opsets)
        domain = "" if node.domain == "ai.onnx" else node.domain
        key = (domain, node.op_type, opsets.get(domain), walk.dtype(node), verdict, note)
        groups.setdefault(key, []).append(path + (node.name or f"{node.op_type}#{walk.index}"))
    rows = [CoverageRow(d, op, opset, dtype, len(names), tuple(names[:3]), verdict, note)
            for (d, op, opset, dtype, verdict, note), names in groups.items()]
    opset = walk.opsets.get("")
    if opset is not None and not matrix.opset_min <= opset <= matrix.opset_max:
        warnings.append(f"model opset {opset} is outside the matrix's {matrix.opset_min}-"
                        f"{matrix.opset_max}")
    return CoverageReport(matrix, rows, _dynamic_inputs(inferred.graph), opset, warnings,
                          trt_version)


def _dynamic_inputs(graph: Any) -> list[DynamicInput]:
    initializers = {t.name for t in graph.initializer}
    found = []
    for value in graph.input:
        if value.name in initializers or not value.type.HasField("tensor_type"):
            continue
        dims = [d.dim_param if d.HasField("dim_param") else
                str(d.dim_value) if d.HasField("dim_value") else "?"
                for d in value.type.tensor_type.shape.dim]
        if any(not d.isdigit() for d in dims):
            found.append(DynamicInput(value.name, tuple(dims)))
    return found


class _Walk:
    """Types, constants and local functions of one model, and the per-node decision."""

    def __init__(self, model: Any, matrix: Matrix) -> None:
        from onnx import TensorProto

        self.matrix = matrix
        self.index = 0
        self.opsets = {("" if o.domain == "ai.onnx" else o.domain): o.version
                       for o in model.opset_import}
        self.functions = {f.name: f for f in model.functions}
        self.types: dict[str, str] = {}
        self.constants: dict[str, Any] = {}
        self._type_name = TensorProto.DataType.Name
        self._collect(model.graph)
        for function in model.functions:
            for node in function.node:
                self._constant_node(node)

    def _collect(self, graph: Any) -> None:
        for value in [*graph.input, *graph.output, *graph.value_info]:
            if value.type.HasField("tensor_type") and value.type.tensor_type.elem_type:
                self.types[value.name] = self._name(value.type.tensor_type.elem_type)
        for tensor in graph.initializer:
            self.types[tensor.name] = self._name(tensor.data_type)
            self.constants[tensor.name] = tensor
        for node in graph.node:
            self._constant_node(node)
            for attribute in node.attribute:
                for sub in [attribute.g] if attribute.type == attribute.GRAPH else attribute.graphs:
                    self._collect(sub)

    def _constant_node(self, node: Any) -> None:
        if node.op_type == "Constant" and node.domain in ONNX_DOMAINS and node.output:
            value = next((a.t for a in node.attribute if a.name == "value"), None)
            self.constants[node.output[0]] = value
            if value is not None:
                self.types.setdefault(node.output[0], self._name(value.data_type))

    def _name(self, elem_type: int) -> str:
        name = str(self._type_name(elem_type))
        return _TYPE_NAMES.get(name, name)

    def nodes(self, graph: Any, path: str, opsets: dict[str, int]
              ) -> Iterator[tuple[Any, str, dict[str, int]]]:
        """Every node, depth first, with subgraphs and local-function bodies."""
        for node in graph.node:
            self.index += 1
            yield node, path, opsets
            name = node.name or f"{node.op_type}#{self.index}"
            for attribute in node.attribute:
                for sub in [attribute.g] if attribute.type == attribute.GRAPH else attribute.graphs:
                    yield from self.nodes(sub, f"{path}{name}/{attribute.name}/", opsets)
            function = self._function(node)
            if function is not None:
                inner = {**opsets, **{("" if o.domain == "ai.onnx" else o.domain): o.version
                                      for o in function.opset_import}}
                yield from self.nodes(function, f"{path}{name}/{function.name}/", inner)

    def _function(self, node: Any) -> Any:
        if node.op_type in self.matrix.ops:  # a built-in importer wins (parseNode)
            return None
        return self.functions.get(node.op_type)

    def dtype(self, node: Any) -> str:
        position = _DATA_INPUT.get(node.op_type, 0)
        names = list(node.output) if position < 0 or not node.input else list(node.input)
        position = max(position, 0)
        if position >= len(names) or not names[position]:
            return "?"
        return self.types.get(names[position], "?")

    def decide(self, node: Any, opsets: dict[str, int]) -> tuple[Verdict, str]:
        """The verdict and the note for one node."""
        row = self.matrix.ops.get(node.op_type)
        custom = node.domain not in ONNX_DOMAINS
        if row is None:
            if self._function(node) is not None:
                return Verdict.SUPPORTED, ("model-local function: the parser imports its "
                                           "body (its nodes are listed too)")
            where = f"custom domain '{node.domain}'" if custom else "not in the matrix"
            return Verdict.UNSUPPORTED, (f"{where}: {PLUGIN} named {node.op_type} "
                                         "(FallbackPluginImporter)")
        if not row.supported:
            note = f"marked N in the matrix: {PLUGIN}"
            return Verdict.UNSUPPORTED, note + (f" ({row.restriction})" if row.restriction else "")
        problems = self._type_problems(node, row)
        if any(p.startswith("TensorRT has no") for p in problems):
            return Verdict.UNSUPPORTED, "; ".join(problems)
        problems += _attribute_problems(node, row) + self._constant_problems(node, row, opsets)
        if custom:
            problems.insert(0, f"custom domain '{node.domain}', but the parser dispatches on "
                               f"op_type alone: imported as ONNX {node.op_type}, check the "
                               "semantics match")
        if problems:
            return Verdict.RESTRICTED, "; ".join(problems)
        if row.restriction and not any(k in row.restriction for k in _FULLY_CHECKED):
            return Verdict.SUPPORTED, f"check: {row.restriction}"
        return Verdict.SUPPORTED, ""

    def _type_problems(self, node: Any, row: OpSupport) -> list[str]:
        dtype = self.dtype(node)
        if dtype == "?" or dtype in row.types:
            return []
        if dtype not in self.matrix.data_types:
            return [f"TensorRT has no {dtype} tensors"]
        listed = f"{node.op_type} lists {', '.join(row.types)}"
        return [f"{TYPE_NOTES[dtype]} ({listed})" if dtype in TYPE_NOTES
                else f"{dtype} is not among the supported types ({listed})"]

    def _constant_problems(self, node: Any, row: OpSupport, opsets: dict[str, int]
                           ) -> list[str]:
        """`x` must be an initializer / a constant, and the Q/DQ zero point and TopK K."""
        from onnx import defs, numpy_helper

        problems = []
        try:
            schema = defs.get_schema(node.op_type, opsets.get("", LATEST.opset_max), "")
            formal = [i.name for i in schema.inputs]
        except Exception:  # an op this onnx does not know: nothing to name inputs by
            formal = []
        actual = dict(zip(formal, node.input, strict=False))
        for name, tensor in actual.items():
            rule = row.restriction
            constant_rule = (f"`{name}` must be" in rule and "constant" in rule) or \
                f"`{name}` must be an initializer" in rule
            if tensor and constant_rule and tensor not in self.constants:
                problems.append(f"`{name}` is computed in the graph ({row.restriction})")
        for name in ("x_zero_point", "y_zero_point"):
            value = self.constants.get(actual.get(name, ""))
            if value is not None and numpy_helper.to_array(value).any() and \
                    f"`{name}` must be" in row.restriction:
                problems.append(f"non-zero `{name}` ({row.restriction})")
        k = self.constants.get(actual.get("K", ""))
        if node.op_type == "TopK" and k is not None and "3840" in row.restriction and \
                numpy_helper.to_array(k).max(initial=0) >= 3840:
            problems.append("`K` >= 3840")
        return problems


def _attribute_problems(node: Any, row: OpSupport) -> list[str]:
    """Attribute values outside what the row's restriction allows."""
    from onnx import helper

    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    text = {k: v.decode() if isinstance(v, bytes) else v for k, v in attrs.items()}
    op, problems = node.op_type, []
    if op == "Resize":
        for name, (default, allowed) in _RESIZE.items():
            if text.get(name, default) not in allowed:
                problems.append(f"{name}={text[name]} (supported: {', '.join(allowed)})")
        if text.get("mode", "nearest") == "nearest" and \
                text.get("nearest_mode", "round_prefer_floor") not in _NEAREST:
            problems.append(f"nearest_mode={text['nearest_mode']} unsupported")
        if text.get("antialias", 0):
            problems.append("antialias is not supported")
    if op in ("MaxPool", "AveragePool", "LpPool"):
        if any(d != 1 for d in text.get("dilations", [])):
            problems.append("`dilations` must be empty or all ones")
        kernel = text.get("kernel_shape", [0, 0])
        if "pooling only" in row.restriction and len(kernel) not in (2, 3):
            problems.append("2D or 3D pooling only")
    if op == "MaxPool" and len(node.output) > 1 and node.output[1]:
        problems.append("the `Indices` output is unsupported")
    if op == "TopK" and "sorted" in row.restriction and text.get("sorted", 1) != 1:
        problems.append("`sorted` must be 1")
    if op == "LSTM" and "input_forget" in row.restriction:
        problems += [f"`{a}` must be 0" for a in ("input_forget", "layout") if text.get(a, 0)]
    per = _ACTIVATIONS_PER_DIRECTION.get(op)
    activations = text.get("activations", [])
    if per and text.get("direction") == "bidirectional" and len(activations) == 2 * per and \
            activations[:per] != activations[per:]:
        problems.append("bidirectional with different forward/reverse activations")
    if op == "Constant" and "sparse_value" in row.restriction and \
            {"sparse_value", "value_string", "value_strings"} & set(attrs):
        problems.append("`sparse_value` / `value_string(s)` attributes are unsupported")
    if op == "ScatterND" and "`reduction`" in row.restriction and \
            text.get("reduction", "none") != "none":
        problems.append(f"reduction={text['reduction']} is not supported")
    if op == "LayerNormalization" and "first output" in row.restriction and \
            any(node.output[1:]):
        problems.append("only the first output `Y` is supported")
    return problems
