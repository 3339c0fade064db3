"""Which operators of a .tflite model the TFLite NNAPI delegate takes, per Android API level.

The table below is a transcription of `NNAPIDelegateKernel::Validate` — the function
the delegate calls on every node before it builds an NNAPI model — plus the few
places around it that change what a node needs (`NeedInt8Conversion`,
`TransformHardSwishIntoSupportedOps`, the fp16 weight folding in `DoPrepare`).
Source read (see `SOURCE`): google-ai-edge/LiteRT `tflite/delegates/nnapi/nnapi_delegate.cc`
and `nnapi_delegate_kernel.h` at commit 5c8a6d4b8063d83e0aaf1cc86b0da27570677daf (LiteRT is
where the TFLite runtime and the ai-edge-litert wheels are now built from), cross-checked
against tensorflow/tensorflow `tensorflow/lite/delegates/nnapi/nnapi_delegate.cc` at
acdcab508aba594419934b482957e13d4f5b2455. Constants from `nnapi_delegate_kernel.h`:
kMinSdkVersionForNNAPI = 27 (NNAPI 1.0), ...NNAPI11 = 28, ...NNAPI12 = 29, ...NNAPI13 = 30,
kNNAPIRuntimeFeatureLevel5 = 31, ...6 = 1000006, ...7 = 1000007.

Why a table and not the delegate itself: the delegate only runs on a phone, and a
reviewer wants to know *before* that which nodes will fall back to the CPU.

    model_ops(path)          ->  [OpUse]        op, version, tensor types, checked facts, count
    coverage(ops, api_level) ->  [CoverageRow]  yes / no / conditional, minimum level, why
    render_markdown(rows, api_level)            the table for the report and the docs

What the table cannot see (so "yes" means "the delegate's own checks accept it"):
the device's NNAPI driver can still refuse an op (from API 29 the delegate asks it with
`ANeuralNetworksModel_getSupportedOperationsForDevices`), and on API >= 29 the delegate
does nothing at all when the only NNAPI device is the `nnapi-reference` CPU
implementation (`disallow_nnapi_cpu` defaults to true). Checks that depend on tensor
values the report does not evaluate are listed as conditions: such rows say
"conditional".

int8: TFLite's full-integer models use signed, asymmetric int8. NNAPI has signed int8
(TENSOR_QUANT8_ASYMM_SIGNED) only from NNAPI 1.3 (API 30). Below API 30 the delegate
converts int8 tensors to uint8 (zero point + 128) for the ops `NeedInt8Conversion`
lists, so many int8 ops still run from API 27/29; the ops where signed int8 really needs
API 30 are QUANTIZE with an int8 output, DEQUANTIZE of asymmetric int8, CAST, SPLIT and
SQUARED_DIFFERENCE. CONV_2D, DEPTHWISE_CONV_2D and FULLY_CONNECTED refuse int8 below
API 29 (`ExpectIsFloatOrUint8Operator`). uint8 models work from API 27.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgebuild.backends.tflite.nnapi_rules import (
    API27,
    API29,
    API30,
    API31,
    DYNAMIC,
    FL6,
    FUSED_NONE,
    NEVER,
    RULES,
    SOURCE,
    CoverageRow,
    OpUse,
    Rule,
    Support,
    level_name,
)
from edgebuild.errors import BackendUnavailable, StageError

NOT_IN_TABLE = "not in the delegate's table: falls back to CPU"
_DATA_INPUT = {"SELECT": 1, "SPLIT": 1, "TRANSPOSE_CONV": 2}
# NNAPI's FuseCode has NONE, RELU, RELU1 and RELU6; Validate passes the code through.
_NNAPI_FUSE = {"RELU", "RELU_N1_TO_1", "RELU6"}


def _schema() -> Any:
    """The TFLite flatbuffer schema module (generated Python), cheapest one first."""
    for module in ("ai_edge_litert.schema_py_generated",
                   "tensorflow.lite.python.schema_py_generated"):
        try:
            return importlib.import_module(module)
        except ImportError:
            continue
    raise BackendUnavailable("tflite", "reading a .tflite model needs ai-edge-litert "
                             "(or tensorflow)", extra="tflite")


def _names(enum_class: Any) -> dict[int, str]:
    return {v: k for k, v in vars(enum_class).items()
            if not k.startswith("_") and isinstance(v, int)}


def model_ops(path: Path) -> list[OpUse]:
    """Every kind of operator in a .tflite file, in first-use order, with counts.

    Reads the flatbuffer with the schema module that ships with ai-edge-litert; no
    interpreter is created, so it is fast and works for models this machine can't run.
    """
    data = Path(path).read_bytes()
    if len(data) < 8 or data[4:8] != b"TFL3":
        raise StageError(f"{path} is not a TFLite model (no TFL3 flatbuffer identifier)",
                         "pass the .tflite file the converter wrote")
    schema = _schema()
    model = schema.Model.GetRootAs(data, 0)
    ops = _names(schema.BuiltinOperator)
    types = _names(schema.TensorType)
    options = _names(schema.BuiltinOptions)
    activations = _names(schema.ActivationFunctionType)
    reader = _Reader(schema, model, types, options, activations)

    counts: dict[tuple[str, int, bool, str, str, tuple[str, ...]], int] = {}
    for s in range(model.SubgraphsLength()):
        graph = model.Subgraphs(s)
        for i in range(graph.OperatorsLength()):
            op = graph.Operators(i)
            code = model.OperatorCodes(op.OpcodeIndex())
            builtin = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
            custom = builtin == schema.BuiltinOperator.CUSTOM
            name = (code.CustomCode() or b"?").decode("utf-8", "replace") if custom \
                else ops.get(builtin, f"BUILTIN_{builtin}")
            use = reader.describe(graph, op, name)
            key = (name, max(code.Version(), 1), custom, *use)
            counts[key] = counts.get(key, 0) + 1
    return [OpUse(name, version, count, custom, input_type, output_type, features)
            for (name, version, custom, input_type, output_type, features), count
            in counts.items()]


class _Reader:
    """Tensor types and the facts Validate checks, read from one operator."""

    def __init__(self, schema: Any, model: Any, types: dict[int, str],
                 options: dict[int, str], activations: dict[int, str]) -> None:
        self.schema, self.model = schema, model
        self.types, self.options, self.activations = types, options, activations

    def describe(self, graph: Any, op: Any, name: str) -> tuple[str, str, tuple[str, ...]]:
        inputs = [op.Inputs(j) for j in range(op.InputsLength())]
        outputs = [op.Outputs(j) for j in range(op.OutputsLength())]
        data_pos = _DATA_INPUT.get(name, 0)
        data = self._tensor(graph, inputs, data_pos)
        out = self._tensor(graph, outputs, 0)
        features: set[str] = set()
        opts = self._options(op)
        activation = self.activations.get(getattr(opts, "FusedActivationFunction",
                                                  lambda: 0)(), "NONE")
        if activation != "NONE":
            features.add(f"fused {activation}")
        if data is not None:
            if self._rank(data) > 4 or (out is not None and self._rank(out) > 4):
                features.add("rank>4")
            if name == "DEQUANTIZE" and self._type(data) == "int8" and \
                    self._asymmetric(data):
                features.add("asymmetric int8")
            if self._constant(data) and name in ("DEQUANTIZE", "DENSIFY"):
                features.add("constant input")
        features |= self._op_facts(graph, name, inputs, data, out, opts)
        return (self._type(data) if data is not None else "",
                self._type(out) if out is not None else "", tuple(sorted(features)))

    def _op_facts(self, graph: Any, name: str, inputs: list[int], data: Any, out: Any,
                  opts: Any) -> set[str]:
        facts: set[str] = set()
        weights = self._tensor(graph, inputs, 1)
        if name in ("CONV_2D", "DEPTHWISE_CONV_2D") and opts is not None and (
                opts.DilationWFactor() != 1 or opts.DilationHFactor() != 1):
            facts.add("dilated")
        if name in ("CONV_2D", "FULLY_CONNECTED") and weights is not None and data is not None:
            if weights.Quantization() is not None and weights.Quantization().ScaleLength() > 1:
                facts.add("per-channel weights")
            if self._type(data) == "float32" and self._type(weights) in ("int8", "uint8"):
                facts.add("hybrid (float input, int8 weights)")
        if name == "CONV_2D" and data is not None and weights is not None:
            d, w = self._shape(data), self._shape(weights)
            if len(d) == 4 and len(w) == 4 and d[3] > 0 and w[3] > 0 and d[3] != w[3]:
                facts.add("grouped")
        if name == "FULLY_CONNECTED" and opts is not None and opts.KeepNumDims():
            facts.add("keep_num_dims")
        if name == "SOFTMAX" and data is not None and self._rank(data) in (1, 3):
            facts.add("rank 1 or 3")
        if name == "AVERAGE_POOL_2D" and opts is not None and data is not None and \
                self._type(data) in ("int8", "uint8") and \
                opts.FilterWidth() * opts.FilterHeight() > 256:
            facts.add("quantized window>256")
        if name in ("RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR") and opts is not None:
            if opts.AlignCorners():
                facts.add("align_corners")
            if opts.HalfPixelCenters():
                facts.add("half_pixel_centers")
        if name == "RESIZE_BILINEAR" and out is not None:
            shape = self._shape(out)
            if len(shape) == 4 and shape[1] != shape[2]:
                facts.add("non-square output")
        shape_input = {"RESHAPE": 1, "TRANSPOSE": 1, "RESIZE_BILINEAR": 1,
                       "RESIZE_NEAREST_NEIGHBOR": 1, "EXPAND_DIMS": 1, "TOPK_V2": 1,
                       "SPLIT": 0, "TRANSPOSE_CONV": 0}.get(name)
        if shape_input is not None:
            tensor = self._tensor(graph, inputs, shape_input)
            if tensor is not None and not self._constant(tensor):
                facts.add(DYNAMIC)
        if name == "GATHER" and weights is not None:
            if self._type(weights) == "int64":
                facts.add("int64 indices")
            if self._rank(weights) == 0:
                facts.add("scalar indices")
        if name in ("ARG_MAX", "ARG_MIN") and out is not None and self._type(out) == "int64":
            facts.add("int64 output")
        if name in ("MEAN", "SUM", "REDUCE_PROD", "REDUCE_ANY", "RESHAPE") and \
                out is not None and self._rank(out) == 0:
            facts.add("scalar output")
        if name in ("REDUCE_MIN", "REDUCE_MAX") and data is not None and self._rank(data) == 0:
            facts.add("scalar input")
        if name in ("PAD", "PADV2", "MIRROR_PAD") and data is not None and \
                0 in self._shape(data):
            facts.add("zero-size input")
        if name == "SLICE" and any(
                t is not None and self._type(t) == "int64"
                for t in (self._tensor(graph, inputs, 1), self._tensor(graph, inputs, 2))):
            facts.add("int64 begin/size")
        if name in ("MAXIMUM", "MINIMUM") and any(
                t is not None and self._rank(t) == 0 and not self._constant(t)
                for t in (self._tensor(graph, inputs, 0), self._tensor(graph, inputs, 1))):
            facts.add("non-constant scalar operand")
        if name == "SELECT":
            condition = self._tensor(graph, inputs, 0)
            if condition is not None and data is not None and \
                    self._shape(condition) != self._shape(data):
                facts.add("broadcast condition")
        if name == "SQUEEZE" and opts is not None and opts.SqueezeDimsLength() == 0:
            facts.add("no squeeze_dims")
        return facts

    def _options(self, op: Any) -> Any:
        name = self.options.get(op.BuiltinOptionsType(), "NONE")
        table = op.BuiltinOptions()
        if name == "NONE" or table is None or not hasattr(self.schema, name):
            return None
        options = getattr(self.schema, name)()
        options.Init(table.Bytes, table.Pos)
        return options

    @staticmethod
    def _tensor(graph: Any, indices: list[int], position: int) -> Any:
        if position >= len(indices) or indices[position] < 0:
            return None
        return graph.Tensors(indices[position])

    def _type(self, tensor: Any) -> str:
        return self.types.get(tensor.Type(), f"type{tensor.Type()}").lower()

    @staticmethod
    def _shape(tensor: Any) -> list[int]:
        return [int(tensor.Shape(i)) for i in range(tensor.ShapeLength())]

    def _rank(self, tensor: Any) -> int:
        return int(tensor.ShapeLength())

    @staticmethod
    def _asymmetric(tensor: Any) -> bool:
        q = tensor.Quantization()
        return q is not None and any(q.ZeroPoint(i) != 0 for i in range(q.ZeroPointLength()))

    def _constant(self, tensor: Any) -> bool:
        index = tensor.Buffer()
        if index <= 0 or index >= self.model.BuffersLength():
            return False
        buffer = self.model.Buffers(index)
        return bool(buffer.DataLength() > 0 or buffer.Offset() > 1)


def coverage(ops: list[OpUse], api_level: int) -> list[CoverageRow]:
    """The NNAPI delegate's verdict on each op kind at `api_level` (27 = Android 8.1)."""
    return [_row(use, api_level) for use in ops]


@dataclass
class _Needs:
    """What one OpUse needs: the levels and why, refusals, notes, unchecked conditions."""

    reasons: list[tuple[int, str]] = field(default_factory=list)
    refusals: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    conditions: list[str] = field(default_factory=list)

    @property
    def level(self) -> int:
        return max(level for level, _ in self.reasons)

    def blocking(self, api: int) -> str:
        """'int8 input, per-channel weights need API 29 (NNAPI 1.2); ...' for levels > api."""
        by_level: dict[int, list[str]] = {}
        for level, subject in self.reasons:
            if level > api and subject not in by_level.setdefault(level, []):
                by_level[level].append(subject)
        return "; ".join(f"{', '.join(subjects)} need{'s' if len(subjects) == 1 else ''} "
                         f"{level_name(level)}" for level, subjects in sorted(by_level.items()))


def _row(use: OpUse, api: int) -> CoverageRow:
    def row(supported: Support, level: int | None, nnapi: str, notes: list[str],
            level_text: str | None = None) -> CoverageRow:
        return CoverageRow(
            use.name, use.version, use.count, use.input_type, use.output_type, use.features,
            supported, level if level is not None and level < FL6 else None,
            level_text if level_text is not None else level_name(level), nnapi,
            "; ".join(notes))

    if use.custom:
        return row(Support.NO, NEVER, "—", ["custom op: the NNAPI delegate maps builtin "
                                           "ops only; runs on CPU"], "—")
    rule = RULES.get(use.name)
    if rule is None:
        return row(Support.NO, NEVER, "—", [NOT_IN_TABLE], "—")
    needs = _requirements(rule, use, api)
    if needs.refusals:
        return row(Support.NO, NEVER, rule.nnapi, needs.refusals + needs.notes)
    level = needs.level
    if api < API27:
        return row(Support.NO, level, rule.nnapi, ["NNAPI needs Android 8.1 (API 27)"])
    if level >= FL6:
        if api < API31:
            return row(Support.NO, level, rule.nnapi, [needs.blocking(api), *needs.notes])
        return row(Support.CONDITIONAL, level, rule.nnapi, [
            needs.blocking(API31) + " in both the NNAPI runtime and the driver (feature "
            "levels after 5 are not tied to an API level)", *needs.notes,
            *(f"if {c}" for c in needs.conditions)])
    if api < level:
        return row(Support.NO, level, rule.nnapi, [needs.blocking(api), *needs.notes])
    if use.input_type == "int8" and api < API30:
        if rule.int8_converted:
            needs.notes.append("int8 runs as uint8 below API 30 (zero point + 128)")
        elif "*" in rule.types:  # not in NeedInt8Conversion: mapped to TENSOR_QUANT8_SYMM
            needs.conditions.append("the int8 tensors have zero point 0 (below API 30 the "
                                    "delegate passes them as TENSOR_QUANT8_SYMM)")
    if rule.uint8_scale_rule and use.input_type == "uint8" and api < API29:
        needs.conditions.append("input_scale x filter_scale < output_scale (uint8 below "
                                "API 29)")
    status = Support.CONDITIONAL if needs.conditions else Support.YES
    return row(status, level, rule.nnapi,
               [*needs.notes, *(f"if {c}" for c in needs.conditions)])


def _requirements(rule: Rule, use: OpUse, api: int) -> _Needs:
    """Everything Validate asks of `use`, as levels with reasons and outright refusals."""
    needs = _Needs(reasons=[(rule.min_level, "the op")], conditions=list(rule.conditions))
    if use.name == "DEQUANTIZE" and use.input_type == "float16" and \
            "constant input" in use.features:
        # DoPrepare's fp16 weight remapping folds these nodes before Validate is asked.
        needs.reasons = [(API27, "the op")]
        needs.conditions = []
        needs.notes.append("constant fp16 weights: the delegate folds this node and "
                           "converts the weights to fp32 itself")
        return needs
    top = rule.max_version_on_devices or rule.max_version
    if top is not None and use.version > top:
        needs.refusals.append(f"op version {use.version} > {top}, the highest the delegate "
                              "accepts")
    elif rule.max_version is not None and use.version > rule.max_version:
        needs.reasons.append((API29, f"v{use.version} (only with named target devices, "
                                     "the default from API 29)"))
    if use.input_type and "*" not in rule.types:
        needed = rule.types.get(use.input_type)
        if needed is None:
            needs.refusals.append(f"{use.input_type} input refused (accepts "
                                  f"{', '.join(sorted(rule.types))})")
        elif needed > rule.min_level:
            needs.reasons.append((needed, f"{use.input_type} input"))
    elif "*" in rule.types:
        needs.reasons.append((rule.types["*"], "the op"))
    if use.output_type and rule.output_types:
        needed_out = rule.output_types.get(use.output_type)
        if needed_out is None:
            needs.refusals.append(f"{use.output_type} output refused")
        elif needed_out > rule.min_level:
            needs.reasons.append((needed_out, f"{use.output_type} output"))
    for fact in use.features:
        key = fact
        if fact.startswith("fused "):
            key = "fused"
            activation = fact.removeprefix("fused ")
            if "*" in rule.no_activation_for or use.input_type in rule.no_activation_for:
                needs.refusals.append(f"fused {activation} refused ({FUSED_NONE})")
            elif activation not in _NNAPI_FUSE:
                needs.conditions.append(f"the driver takes fused {activation} (NNAPI's "
                                        "FuseCode has only NONE/RELU/RELU1/RELU6)")
        if key in rule.features:
            needed_fact, text = rule.features[key]
            if needed_fact is None:
                needs.refusals.append(f"{fact}: {text}")
            else:
                needs.reasons.append((needed_fact, text))
    needs.notes.extend(rule.notes)
    return needs


def _counts(rows: list[CoverageRow]) -> dict[Support, int]:
    totals = dict.fromkeys(Support, 0)
    for r in rows:
        totals[r.supported] += r.count
    return totals


def render_markdown(rows: list[CoverageRow], api_level: int) -> str:
    """The coverage table with its source and what a reader should make of it."""
    totals = _counts(rows)
    nodes = sum(totals.values())
    lines = [
        f"### NNAPI delegate coverage at Android API {api_level}",
        "",
        f"{totals[Support.YES]} of {nodes} nodes pass the TFLite NNAPI delegate's checks, "
        f"{totals[Support.CONDITIONAL]} depend on tensor values or the device, and "
        f"{totals[Support.NO]} fall back to the CPU (TFLite kernels / XNNPACK).",
        "",
        "| op | ver | types | facts | nodes | NNAPI | lowest level | notes |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        types = f"{r.input_type or '?'} → {r.output_type or '?'}"
        cells = [r.op, f"v{r.version}", types, ", ".join(r.features) or "", str(r.count),
                 r.supported.value, r.min_level, r.note]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    lines += [
        "",
        f"Source: {SOURCE}.",
        "",
        "\"yes\" means the delegate's own per-node checks accept the node at this API "
        "level; the phone's NNAPI driver can still refuse it (from API 29 the delegate "
        "asks the driver), and from API 29 the delegate does nothing when the only NNAPI "
        "device is the nnapi-reference CPU implementation. Nodes outside the delegate "
        "split the graph into partitions; only the largest partitions are delegated "
        "(max_number_delegated_partitions, 3 by default).",
        "",
        "NNAPI is deprecated from Android 15 (API 35): for new phones use the GPU delegate "
        "or a vendor delegate "
        "(https://developer.android.com/ndk/guides/neuralnetworks/migration-guide).",
    ]
    if api_level >= 35:
        lines += ["", f"API {api_level} is Android 15 or later, where NNAPI is deprecated."]
    return "\n".join(lines) + "\n"
