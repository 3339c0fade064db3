"""Full-integer INT8 TFLite that keeps the shared INT8 rules' float nodes float.

`tf.lite.TFLiteConverter` with `TFLITE_BUILTINS_INT8` quantizes every op; it has no
public switch to leave one float. Its MLIR quantizer has one: `denylisted_nodes`
(op output tensor names), the argument behind TensorFlow's
`QuantizationDebugger(...).get_nondebug_quantized_model()`. So a build with float
nodes runs the converter with `_experimental_calibrate_only` (the float model with
calibration statistics, one calibration), then
`tensorflow.lite.python.convert.mlir_quantize` with the same arguments the converter
passes it (per-channel, input/output types) plus the denylist. The result has
DEQUANTIZE before and QUANTIZE after each float op:

    ONNX (converted.onnx) ─ quant.safety.float_nodes ─▶ Concat_2, Sigmoid_1, …
      ─ onnx2tf_layers.json ─▶ Keras layers raw, tf.math.sigmoid_1, …
      ─ calibrated .tflite op names `model/<layer>/<op>` ─▶ denylisted_nodes

TFLite's quantizer gives a Concat's inputs the Concat's own scale back through the
"same-scale" ops in between (Reshape, Transpose, Slice, …) even when the Concat is
denylisted: on the test detector with the mixed-range rule alone, the scores' Reshape
got the output's scale 1.239 and every score was 0 or 1.239 again. So for a
mixed-range node those feeding ops stay float too (`same_scale`): each input keeps
the scale of the op that computed it (the Sigmoid's 1/256), "per input".

What cannot be kept float is listed, never dropped: an op TFLite fused with a node
that stays int8 (a Relu into its Conv), a node the converter folded away
(`not_in_model`), and a float graph output that `io_type: int8/uint8` quantizes
again with one scale at the model's edge.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from edgebuild.backends.tflite.options import TfliteOptions
    from edgebuild.core.artifact import Artifact
    from edgebuild.data.loaders import Samples
    from edgebuild.quant.safety import FloatNodes

RANGE_SAMPLES = 32  # calibration samples that measure the mixed-range rule's ranges
# ONNX ops TFLite quantizes with their input's scale: a mixed-range node's scale would
# reach back through them to the producers of its inputs.
SAME_SCALE_OPS = frozenset({"Reshape", "Transpose", "Flatten", "Squeeze", "Unsqueeze",
                            "Slice", "Gather", "Identity", "Split", "Pad", "MaxPool",
                            "DepthToSpace", "SpaceToDepth", "Expand", "Tile", "Concat"})
API = ("tensorflow.lite.python.convert.mlir_quantize(denylisted_nodes=...) on the "
       "converter's calibrated model (as QuantizationDebugger.get_nondebug_quantized_model)")


@dataclass
class KeptFloat:
    """The float nodes of one INT8 build and what became of each in the .tflite."""

    chosen: FloatNodes
    layers: dict[str, list[str]]  # every ONNX node -> its Keras layers (onnx2tf)
    outputs: list[str]  # ONNX graph outputs, in order
    producers: dict[str, str]  # ONNX graph output -> the node that computes it
    io_type: str = "float32"
    same_scale: list[str] = field(default_factory=list)  # feeders of mixed-range nodes
    denylisted: list[str] = field(default_factory=list)  # TFLite op output tensor names
    honoured: list[str] = field(default_factory=list)
    not_honoured: dict[str, str] = field(default_factory=dict)
    not_in_model: list[str] = field(default_factory=list)

    @property
    def names(self) -> list[str]:
        return list(dict.fromkeys([*self.chosen.names, *self.same_scale]))

    def to_json(self) -> dict[str, Any]:
        found = self.chosen.to_json()
        return {**found, "nodes": self.names, "same_scale": self.same_scale,
                "api": API if self.denylisted else None,
                "honoured": self.honoured, "not_honoured": self.not_honoured,
                "not_in_model": self.not_in_model, "denylisted_nodes": self.denylisted}


def choose(model: Artifact, options: TfliteOptions, samples: Samples | None,
           count: int) -> KeptFloat | None:
    """The shared INT8 rules on the ONNX graph onnx2tf converted; None when the
    SavedModel came without it (the caller says so in the metadata)."""
    import onnx

    from edgebuild.core.paths import confined
    from edgebuild.quant.safety import float_nodes

    converted = model.metadata.get("converted_onnx")
    layers_file = model.metadata.get("layers_file")
    if not converted or not layers_file:
        return None
    # Names from the artifact's metadata (a shared store's entry): only ever its own files.
    graph_path = confined(model.path, converted, "the converted ONNX file's name")
    layers_path = confined(model.path, layers_file, "the onnx2tf layers file's name")
    if not graph_path.is_file():
        return None
    graph_model = onnx.load(str(graph_path))
    probe = [samples.feed(i) for i in range(min(RANGE_SAMPLES, count, len(samples)))] \
        if samples is not None else None
    graph = graph_model.graph
    chosen = float_nodes(graph_model, probe, options.keep_float.value,
                         options.mixed_range_bound,
                         user=with_fused_activations(graph, options.exclude_nodes))
    producers = {o: n.name for n in graph.node for o in n.output}
    outputs = [o.name for o in graph.output]
    return KeptFloat(chosen, json.loads(layers_path.read_text()), outputs,
                     {o: producers.get(o, "") for o in outputs}, options.io_type.value,
                     same_scale_feeders(graph, [m.node for m in chosen.mixed_range]))


FUSED_ACTIVATIONS = ("Relu", "Clip", "Relu6", "Tanh", "Sigmoid")  # TFLite's fused_activation


def with_fused_activations(graph: Any, nodes: list[str]) -> list[str]:
    """`nodes`, each followed by the activation TFLite fuses into it (its only consumer, a
    Relu or Clip): a fused op with one float and one int8 owner cannot stay float."""
    consumers: dict[str, list[Any]] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    by_name = {n.name: n for n in graph.node}
    found: list[str] = []
    for name in nodes:
        found.append(name)
        node = by_name.get(name)
        if node is None or len(node.output) != 1:
            continue
        after = consumers.get(node.output[0], [])
        if len(after) == 1 and after[0].op_type in FUSED_ACTIVATIONS:
            found.append(after[0].name)
    return list(dict.fromkeys(found))


def same_scale_feeders(graph: Any, nodes: list[str]) -> list[str]:
    """The same-scale ops (SAME_SCALE_OPS) between each of `nodes` and the producers of
    its inputs, which would otherwise take that node's single scale. Graph order.

        Sigmoid ─ Reshape ─┐                 Reshape: same_scale
        Mul ───────────────┴─ Concat (mixed range)
    """
    producers = {o: n for n in graph.node for o in n.output}
    by_name = {n.name: n for n in graph.node}
    chosen: set[str] = set()
    stack = [producers[i] for name in nodes if name in by_name
             for i in by_name[name].input if i in producers]
    while stack:
        node = stack.pop()
        if node.op_type not in SAME_SCALE_OPS or node.name in chosen or node.name in nodes:
            continue
        chosen.add(node.name)
        stack.extend(producers[i] for i in node.input[:1] if i in producers)
    return [n.name for n in graph.node if n.name in chosen]


def denylist(calibrated: bytes, kept: KeptFloat) -> list[str]:
    """The op output tensor names of the calibrated model to leave float; fills in
    what was honoured and what not."""
    owner = {layer: node for node, layers in kept.layers.items() for layer in layers}
    wanted = set(kept.names)
    ops, graph_outputs = _ops(calibrated)
    seen: dict[str, list[str]] = {}  # kept node -> ops (name, fused with) it appears in
    for op_name, outputs in ops:
        owners: list[str] = []
        for tensor in outputs:
            if tensor in graph_outputs:  # named after the signature, not the layer
                owners.append(kept.producers.get(kept.outputs[graph_outputs[tensor]], ""))
            owners.extend(owner[c.split("/")[1]] for c in tensor.split(";")
                          if c.count("/") >= 2 and c.split("/")[1] in owner)
        owners = [o for o in dict.fromkeys(owners) if o]
        mine = [o for o in owners if o in wanted]
        if not mine:
            continue
        others = [o for o in owners if o not in wanted]
        for node in mine:
            seen.setdefault(node, [])
            if others:
                kept.not_honoured[node] = (f"TFLite fused it with {', '.join(others[:3])} "
                                           f"into one {op_name}, which stays int8")
        if not others:
            kept.denylisted.extend(t for t in outputs if t not in kept.denylisted)
    float_outputs = {kept.producers.get(o, "") for o in kept.outputs}
    for node in kept.names:
        if node not in seen:
            kept.not_in_model.append(node)
        elif node not in kept.not_honoured:
            if node in float_outputs and kept.io_type != "float32":
                kept.not_honoured[node] = (
                    f"it runs float, but io_type {kept.io_type} quantizes the graph output "
                    "again with one scale (io_type: float32 keeps it)")
            else:
                kept.honoured.append(node)
    if kept.not_in_model:
        kept.chosen.notes.append("not_in_model: the converter folded or removed these "
                                 "nodes (no op of theirs is in the .tflite)")
    return kept.denylisted


def quantize(calibrated: bytes, converter: Any, io_type: Any, denylisted: list[str]) -> bytes:
    """What TFLiteConverter.convert() does after calibrating, with `denylisted` float."""
    from tensorflow.lite.python.convert import mlir_quantize

    quantized: Any = mlir_quantize(
        calibrated, disable_per_channel=converter._experimental_disable_per_channel,
        input_data_type=io_type, output_data_type=io_type,
        disable_per_channel_for_dense_layers=(
            converter._experimental_disable_per_channel_quantization_for_dense_layers),
        denylisted_nodes=denylisted or None)
    return bytes(quantized)


def _ops(flatbuffer: bytes) -> tuple[list[tuple[str, list[str]]], dict[str, int]]:
    """(op name, output tensor names) of every op, and graph output tensor name -> its
    position in the main signature (ONNX's output order)."""
    from edgebuild.backends.tflite.nnapi import _names, _schema

    schema = _schema()
    model = schema.Model.GetRootAs(flatbuffer, 0)
    builtin_names = _names(schema.BuiltinOperator)
    ops: list[tuple[str, list[str]]] = []
    for s in range(model.SubgraphsLength()):
        graph = model.Subgraphs(s)
        for i in range(graph.OperatorsLength()):
            op = graph.Operators(i)
            code = model.OperatorCodes(op.OpcodeIndex())
            name = builtin_names.get(max(code.BuiltinCode(), code.DeprecatedBuiltinCode()),
                                     "CUSTOM")
            ops.append((name, [_tensor_name(graph, op.Outputs(j))
                               for j in range(op.OutputsLength()) if op.Outputs(j) >= 0]))
    main = model.Subgraphs(0)
    outputs = [_tensor_name(main, main.Outputs(j)) for j in range(main.OutputsLength())]
    if model.SignatureDefsLength():  # ONNX output k is the signature's output_k
        signature = model.SignatureDefs(0)
        keyed = {signature.Outputs(j).Name().decode(): signature.Outputs(j).TensorIndex()
                 for j in range(signature.OutputsLength())}
        if all(k.removeprefix("output_").isdigit() for k in keyed):
            outputs = [_tensor_name(main, keyed[k])
                       for k in sorted(keyed, key=lambda k: int(k.removeprefix("output_")))]
    return ops, {name: k for k, name in enumerate(outputs)}


def _tensor_name(graph: Any, index: int) -> str:
    return str(graph.Tensors(index).Name().decode("utf-8", "replace"))
