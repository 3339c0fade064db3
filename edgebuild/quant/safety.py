"""Which nodes of an ONNX graph INT8 must leave in float: the rules every INT8 path shares.

The quantize pass (ONNX Runtime QDQ, and its TensorRT preset), openvino-quantize
(NNCF `ignored_scope`) and the QNN backend's QDQ recipe all ask this module, so
the same nodes stay float on every backend that can honour it. Three rules:

- **Mixed ranges.** A Concat (or Add/Sum) whose inputs' ranges differ by more than
  `bound` gets no single scale. With one 8-bit scale across inputs whose ranges
  differ by a factor r, the narrow input keeps only 256 / r codes: at r = 16 that
  is 16 levels (4 bits, a step of 1/15 of its range); beyond it the narrow part
  stops being a signal (a YOLO head concatenating box pixels 0-320 with sigmoid
  scores 0-1 has r = 320: the scale 1.25 rounds every score to 0). The node is
  kept float, so each input keeps the Q/DQ of its own producer and nothing is
  quantized after it ("quantize per input, no Q after"). A range here is what
  the quantizer would use for the tensor: [min(lo, 0), max(hi, 0)] over the
  calibration data.
- **Output tail** (`keep_float: auto`): every node after the last weight layer on
  the way to a graph output — decode arithmetic, NMS, the final Sigmoid/Softmax,
  the output Concat. They cost little and are where a quantization error becomes
  a wrong answer (Ultralytics keeps a detector head's decode float for this).
- **Signal front end** (`keep_float: auto`): STFT, DFT, MelWeightMatrix and Pad
  reached from a graph input before any weight layer, with what feeds them: an
  audio model's first divergence under INT8 was its STFT's Pad.

        input ─ Pad ─ STFT ─┐           ┌─ Sigmoid ─ Mul ─┐
          (front end)       └─ Conv ... Conv              Concat ─▶ output
                                        └─ Sigmoid ───────┘ (output tail)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # numpy is imported where it computes: a recipe's params need none of it
    import numpy as np

# Layers with weights: the output tail starts after the last of them.
WEIGHT_OPS = frozenset({"Conv", "ConvTranspose", "Gemm", "MatMul", "Einsum", "LSTM", "GRU",
                        "RNN", "Attention", "ConvInteger", "MatMulInteger", "QLinearConv",
                        "QLinearMatMul"})
MIXED_RANGE_OPS = frozenset({"Concat", "Add", "Sum"})
SIGNAL_OPS = frozenset({"STFT", "DFT", "MelWeightMatrix", "Pad"})
DEFAULT_BOUND = 16.0


class KeepFloat(StrEnum):
    AUTO = "auto"  # the output tail and the signal front end stay float
    NONE = "none"  # only the mixed-range rule and `exclude_nodes`


@dataclass(frozen=True)
class MixedRange:
    node: str
    op_type: str
    ranges: list[tuple[float, float]]  # per input, as the quantizer would use it
    ratio: float

    def to_json(self) -> dict[str, Any]:
        return {"node": self.node, "op_type": self.op_type, "ratio": round(self.ratio, 2),
                "ranges": [[round(lo, 5), round(hi, 5)] for lo, hi in self.ranges]}


@dataclass
class FloatNodes:
    """The nodes kept float and the rule that chose each (for metadata and reports)."""

    keep_float: str = KeepFloat.AUTO.value
    bound: float | None = DEFAULT_BOUND
    output_tail: list[str] = field(default_factory=list)
    signal_front_end: list[str] = field(default_factory=list)
    mixed_range: list[MixedRange] = field(default_factory=list)
    user: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def names(self) -> list[str]:
        return list(dict.fromkeys([*self.user, *(m.node for m in self.mixed_range),
                                   *self.output_tail, *self.signal_front_end]))

    def to_json(self) -> dict[str, Any]:
        return {"keep_float": self.keep_float, "mixed_range_bound": self.bound,
                "nodes": self.names, "mixed_range": [m.to_json() for m in self.mixed_range],
                "output_tail": self.output_tail, "signal_front_end": self.signal_front_end,
                "user": self.user, "notes": self.notes}


def _consumers(graph: Any) -> dict[str, list[Any]]:
    found: dict[str, list[Any]] = {}
    for node in graph.node:
        for name in node.input:
            if name:
                found.setdefault(name, []).append(node)
    return found


def output_tail(graph: Any) -> list[str]:
    """Nodes after the last weight layer on every path they take: each feeds a graph
    output (or nothing) and no weight layer downstream. Graph order."""
    consumers = _consumers(graph)
    feeds_weights: dict[str, bool] = {}  # node name -> a weight layer is downstream
    for node in reversed(graph.node):  # topological order: consumers come later
        feeds_weights[node.name] = any(
            user.op_type in WEIGHT_OPS or feeds_weights.get(user.name, False)
            for out in node.output for user in consumers.get(out, []))
    reaches_output: set[str] = set()
    outputs = {o.name for o in graph.output}
    for node in reversed(graph.node):
        if any(o in outputs for o in node.output) or any(
                user.name in reaches_output for out in node.output
                for user in consumers.get(out, [])):
            reaches_output.add(node.name)
    return [n.name for n in graph.node if n.name and n.name in reaches_output and
            n.op_type not in WEIGHT_OPS and not feeds_weights[n.name] and
            n.op_type not in ("Constant", "Shape")]


def signal_front_end(graph: Any) -> list[str]:
    """STFT/DFT/MelWeightMatrix/Pad reached from the graph inputs before any weight
    layer, with the nodes on the way to them. Graph order."""
    producers = {o: n for n in graph.node for o in n.output}
    inputs = {i.name for i in graph.input}
    before_weights: set[str] = set()  # reached from an input through no weight layer
    for node in graph.node:
        if node.op_type in WEIGHT_OPS:
            continue
        if any(i in inputs or (i in producers and producers[i].name in before_weights)
               for i in node.input):
            before_weights.add(node.name)
    chosen: set[str] = set()
    stack = [n for n in graph.node if n.name in before_weights and n.op_type in SIGNAL_OPS]
    while stack:
        node = stack.pop()
        if node.name in chosen:
            continue
        chosen.add(node.name)
        stack.extend(producers[i] for i in node.input
                     if i in producers and producers[i].name in before_weights)
    return [n.name for n in graph.node if n.name in chosen]


def quantizer_range(values: Iterable[np.ndarray]) -> tuple[float, float]:
    """[min(lo, 0), max(hi, 0)] over `values`: the range a quantizer gives the tensor."""
    import numpy as np

    lo, hi = 0.0, 0.0
    for value in values:
        if value.size:
            finite = value[np.isfinite(value)]
            if finite.size:
                lo, hi = min(lo, float(finite.min())), max(hi, float(finite.max()))
    return lo, hi


def mixed_range_nodes(graph: Any, ranges: dict[str, tuple[float, float]], bound: float,
                      op_types: Iterable[str] | None = None) -> list[MixedRange]:
    """The Concat/Add/Sum nodes whose inputs' quantizer ranges differ by more than `bound`.

    An all-zero input needs no codes (0 is exact) and is left out of the ratio.
    """
    allowed = MIXED_RANGE_OPS if op_types is None else MIXED_RANGE_OPS & set(op_types)
    found: list[MixedRange] = []
    for node in graph.node:
        if node.op_type not in allowed or not node.name:
            continue
        spans = [ranges[i] for i in node.input if i in ranges]
        widths = [hi - lo for lo, hi in spans if hi - lo > 0]
        if len(spans) < 2 or len(widths) < 2:
            continue
        ratio = max(widths) / min(widths)
        if ratio > bound:
            found.append(MixedRange(node.name, node.op_type, spans, ratio))
    return found


def tensor_ranges(model: Any, tensors: list[str],
                  feeds: list[dict[str, np.ndarray]]) -> dict[str, tuple[float, float]]:
    """Quantizer ranges of `tensors` (intermediates, graph inputs or initializers) of the
    float `model` over `feeds`, run by ONNX Runtime unoptimized."""
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import numpy_helper

    graph = model.graph
    ranges: dict[str, tuple[float, float]] = {}
    inits = {i.name: i for i in graph.initializer}
    for name in tensors:
        if name in inits and inits[name].data_type == onnx.TensorProto.FLOAT:
            ranges[name] = quantizer_range([numpy_helper.to_array(inits[name])])
    constants = {n.output[0]: n for n in graph.node if n.op_type == "Constant"}
    produced = {o for n in graph.node for o in n.output}
    wanted = [t for t in dict.fromkeys(tensors)
              if t not in ranges and t not in constants and t in produced]
    inputs = {i.name for i in graph.input}
    for name in tensors:
        if name in inputs:
            ranges[name] = quantizer_range([f[name] for f in feeds if name in f])
    if wanted and feeds:
        copy = onnx.shape_inference.infer_shapes(model)
        types = {v.name: v.type.tensor_type.elem_type
                 for v in [*copy.graph.value_info, *copy.graph.output]}
        # Only float tensors have quantizer ranges (shape arithmetic is int64).
        wanted = [n for n in wanted if types.get(n, onnx.TensorProto.FLOAT) ==
                  onnx.TensorProto.FLOAT]
        existing = {o.name for o in copy.graph.output}
        for name in wanted:
            if name not in existing:
                copy.graph.output.append(onnx.helper.make_tensor_value_info(
                    name, onnx.TensorProto.FLOAT, None))
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        so.log_severity_level = 3
        session = ort.InferenceSession(copy.SerializeToString(), so,
                                       providers=["CPUExecutionProvider"])
        float_outputs = {o.name for o in session.get_outputs() if o.type == "tensor(float)"}
        names = [n for n in wanted if n in float_outputs]
        collected: dict[str, list[np.ndarray]] = {n: [] for n in names}
        for feed in feeds:
            for name, value in zip(names, session.run(names, feed), strict=True):
                collected[name].append(np.asarray(value))
        ranges.update({n: quantizer_range(v) for n, v in collected.items()})
    return ranges


def float_nodes(model: Any, feeds: list[dict[str, np.ndarray]] | None,
                keep_float: str = KeepFloat.AUTO.value, bound: float | None = DEFAULT_BOUND,
                user: Iterable[str] = (), op_types: Iterable[str] | None = None) -> FloatNodes:
    """The nodes of `model` (ModelProto) to keep float, by rule.

    `feeds` (calibration inputs) measure the ranges of the mixed-range rule;
    without them that rule cannot run, and the result says so in `notes`.
    """
    graph = model.graph
    result = FloatNodes(keep_float=str(keep_float), bound=bound, user=list(user))
    if keep_float == KeepFloat.AUTO.value:
        computes_floats = _computes_floats(model)
        result.output_tail = [n for n in output_tail(graph) if computes_floats(n)]
        result.signal_front_end = [n for n in signal_front_end(graph) if computes_floats(n)]
    if bound is None:
        return result
    if not feeds:
        result.notes.append("no calibration data: the mixed-range rule was not applied")
        return result
    allowed = MIXED_RANGE_OPS if op_types is None else MIXED_RANGE_OPS & set(op_types)
    tensors = [i for n in graph.node if n.op_type in allowed for i in n.input if i]
    ranges = tensor_ranges(model, tensors, feeds)
    result.mixed_range = mixed_range_nodes(graph, ranges, bound, op_types)
    return result


def _computes_floats(model: Any) -> Any:
    """A predicate: does the named node produce a float tensor? Shape arithmetic
    (int64) is never quantized, and a backend folds it into constants."""
    import onnx

    inferred = onnx.shape_inference.infer_shapes(model)
    types = {v.name: v.type.tensor_type.elem_type
             for v in [*inferred.graph.value_info, *inferred.graph.output]}
    floats = (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16)
    outputs = {n.name: list(n.output) for n in model.graph.node}

    def computes_floats(name: str) -> bool:
        known = [types[o] for o in outputs.get(name, []) if o in types]
        return not known or any(t in floats for t in known)

    return computes_floats


def worst_slice_error(reference: list[np.ndarray], candidate: list[np.ndarray]
                      ) -> tuple[float, str]:
    """The largest relative error of any output channel (axis 1) over the outputs.

    A mixed-range output (box pixels beside 0-1 scores) hides a destroyed part in a
    whole-tensor error: the boxes dominate its norm. Per channel, zeroed scores
    are an error of 1. Returns the error and where ("output k, channel c").
    Outputs whose shapes differ (after NMS) are skipped.
    """
    import numpy as np

    worst, where = 0.0, ""
    for k, (a, b) in enumerate(zip(reference, candidate, strict=True)):
        a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
        if a64.shape != b64.shape or not a64.size:
            continue
        if a64.ndim < 2:
            a64, b64 = a64.reshape(1, 1, -1), b64.reshape(1, 1, -1)
        channels_a = np.moveaxis(a64, 1, 0).reshape(a64.shape[1], -1)
        channels_b = np.moveaxis(b64, 1, 0).reshape(b64.shape[1], -1)
        floor = 1e-6 * float(np.linalg.norm(channels_a)) + 1e-12
        for c, (ca, cb) in enumerate(zip(channels_a, channels_b, strict=True)):
            if not (np.isfinite(ca).all() and np.isfinite(cb).all()):
                continue
            error = float(np.linalg.norm(ca - cb)) / max(float(np.linalg.norm(ca)), floor)
            if error > worst:
                worst, where = error, f"output {k}, channel {c}"
    return worst, where
