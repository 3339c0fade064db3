"""Empirical bias correction of a QDQ-quantized ONNX model (Nagel et al. 2019, §4.2).

Rounding weights to INT8 shifts the *mean* of a layer's output: E[W_q x] -
E[W x] = (W_q - W) E[x] is not zero for a given layer, and depthwise
convolutions (few weights per channel, post-ReLU inputs with a large positive
mean) shift the most. The shift is systematic, so it accumulates through the
network instead of averaging out. Correcting it costs nothing at run time:
the bias absorbs it.

"Empirical": the shift is measured on calibration data, per layer and per
output channel, with the layer's *FP32* input — one extra run of an
augmented float model in which every quantized Conv/Gemm gets a twin fed by
its quantized input and weights:

    x ──────────────────────────── Conv(x, W, b) ─────────┐
    x ── Q/DQ(s_x) ── Conv(·, DQ(W_q), b) ── − ── mean(N, H, W) ──▶ shift
                                              ▲───────────┘

So each layer's own shift is measured, not the shifts propagated from the
layers before it, and all layers are measured in one pass. The float model's
biases are then corrected (b -= shift) and the model is quantized again with
the same activation ranges; the integer weights do not change.

`bias_corrected` applies it to a prepared model: the shifts are measured on its
first quantization and subtracted from the layers each later one quantizes;
`corrected_float` writes that float model for a converter that quantizes itself.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from edgebuild.data.loaders import Samples
    from edgebuild.quant.params import QuantizeParams
    from edgebuild.quant.prepared import Prepared

TWINNED = ("Conv", "Gemm")


def _initializers(model: Any) -> dict[str, Any]:
    return {i.name: i for i in model.graph.initializer}


def _weight_dequantize(node: Any, producers: dict[str, Any], inits: dict[str, Any]) -> Any:
    """The DequantizeLinear making `node`'s weight from an integer initializer, if any."""
    dq = producers.get(node.input[1]) if len(node.input) > 1 else None
    if dq is None or dq.op_type != "DequantizeLinear" or dq.input[0] not in inits:
        return None
    return dq


def measure_shifts(float_path: Path, qdq_path: Path,
                   feeds: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Node name -> per-output-channel mean of (quantized twin - float) over `feeds`."""
    import onnx
    import onnxruntime as ort
    from onnx import helper

    fmodel = onnx.load(str(float_path))
    qmodel = onnx.load(str(qdq_path))
    qinits = _initializers(qmodel)
    producers = {o: n for n in qmodel.graph.node for o in n.output}
    qnodes = {n.name: n for n in qmodel.graph.node if n.op_type in TWINNED and n.name}
    graph = fmodel.graph
    opset = next((o.version for o in fmodel.opset_import if o.domain in ("", "ai.onnx")), 17)
    existing = {i.name for i in graph.initializer}
    outputs: dict[str, str] = {}
    domains: set[str] = set()

    def copy_init(name: str) -> str:
        if name and name not in existing:
            graph.initializer.append(qinits[name])
            existing.add(name)
        return name

    for node in list(graph.node):
        qnode = qnodes.get(node.name)
        if node.op_type not in TWINNED or qnode is None or qnode.op_type != node.op_type:
            continue
        wdq = _weight_dequantize(qnode, producers, qinits)
        if wdq is None:
            continue
        tag = f"__bc_{len(outputs)}"
        x = node.input[0]
        xdq = producers.get(qnode.input[0])
        if xdq is not None and xdq.op_type == "DequantizeLinear":
            q_args = [copy_init(n) for n in xdq.input[1:]]
            domain = _qdq_domain(xdq, qinits, opset)
            graph.node.extend([
                helper.make_node("QuantizeLinear", [x, *q_args], [x + tag + "_q"],
                                 domain=domain),
                helper.make_node("DequantizeLinear", [x + tag + "_q", *q_args], [x + tag + "_dq"],
                                 domain=domain),
            ])
            domains.add(domain)
            x = x + tag + "_dq"
        w_args = [copy_init(n) for n in wdq.input]
        domain = _qdq_domain(wdq, qinits, opset)
        graph.node.append(helper.make_node("DequantizeLinear", w_args, [tag + "_w"],
                                           axis=_axis(wdq), domain=domain))
        domains.add(domain)
        twin = helper.make_node(node.op_type, [x, tag + "_w", *node.input[2:]], [tag + "_y"],
                                name=node.name + tag)
        twin.attribute.extend(node.attribute)
        # every axis but the channels: N and the spatial ones, one for a Conv1d
        rank = len(qinits[wdq.input[0]].dims)
        axes = [0, *range(2, rank)] if node.op_type == "Conv" else [0]
        if opset >= 18:  # axes became an input
            graph.initializer.append(onnx.numpy_helper.from_array(np.asarray(axes, np.int64),
                                                                  tag + "_axes"))
            mean = helper.make_node("ReduceMean", [tag + "_d", tag + "_axes"], [tag + "_m"],
                                    keepdims=0)
        else:
            mean = helper.make_node("ReduceMean", [tag + "_d"], [tag + "_m"], axes=axes,
                                    keepdims=0)
        graph.node.extend([
            twin, helper.make_node("Sub", [tag + "_y", node.output[0]], [tag + "_d"]), mean])
        graph.output.append(helper.make_tensor_value_info(tag + "_m", onnx.TensorProto.FLOAT,
                                                          None))
        outputs[node.name] = tag + "_m"
    if not outputs:
        return {}
    imported = {o.domain for o in fmodel.opset_import} | {"", "ai.onnx"}
    fmodel.opset_import.extend(helper.make_opsetid(d, 1) for d in sorted(domains - imported))
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 3
    session = ort.InferenceSession(fmodel.SerializeToString(), so,
                                   providers=["CPUExecutionProvider"])
    names = list(outputs.values())
    sums: dict[str, np.ndarray] = {}
    for feed in feeds:
        for name, value in zip(names, session.run(names, feed), strict=True):
            sums[name] = sums.get(name, 0) + np.asarray(value, np.float64)
    return {node: sums[out] / len(feeds) for node, out in outputs.items()}


SIXTEEN_BIT = (4, 5)  # onnx.TensorProto.UINT16, INT16


def _qdq_domain(node: Any, inits: dict[str, Any], opset: int) -> str:
    """The domain of a twin of the Q/DQ `node` in the float model (opset `opset`): its own,
    but com.microsoft for 16-bit types below opset 21. ONNX Runtime's quantizer converts a
    model to opset 21 for 16-bit activations (`activation_type: uint16`); the float model
    the shifts are measured in keeps its opset, where ONNX's Q/DQ take 8 bits only."""
    zero = inits.get(node.input[2]) if len(node.input) > 2 else None
    if opset < 21 and node.domain in ("", "ai.onnx") and zero is not None and \
            zero.data_type in SIXTEEN_BIT:
        return "com.microsoft"
    return str(node.domain)


def _axis(node: Any) -> int:
    return next((int(a.i) for a in node.attribute if a.name == "axis"), 1)


def apply_shifts(model: Any, shifts: dict[str, np.ndarray]) -> int:
    """Subtract each node's shift from its bias (created if absent); returns nodes changed."""
    from onnx import numpy_helper

    inits = _initializers(model)
    changed = 0
    for node in model.graph.node:
        shift = shifts.get(node.name)
        if shift is None:
            continue
        if len(node.input) > 2 and node.input[2] in inits:
            old = numpy_helper.to_array(inits[node.input[2]])
            new = (old.astype(np.float64) - shift.reshape(old.shape)).astype(old.dtype)
            inits[node.input[2]].CopyFrom(numpy_helper.from_array(new, node.input[2]))
        elif len(node.input) <= 2 or not node.input[2]:
            name = f"{node.name}__bias_correction"
            model.graph.initializer.append(numpy_helper.from_array(
                (-shift).astype(np.float32), name))
            while len(node.input) < 3:
                node.input.append("")
            node.input[2] = name
        else:  # bias computed at run time: leave it
            continue
        changed += 1
    return changed


def bias_corrected(prepared: Prepared, p: QuantizeParams, calibration: Samples,
                   exclude: list[str], scratch: Path, only: list[str] | None,
                   overrides: dict[str, Any]) -> Path:
    """The float model with the measured shifts of the quantized layers subtracted."""
    import onnx

    from edgebuild.quant.engine import quantize
    from edgebuild.quant.samples import feeds

    if prepared.shifts is None:
        measured = scratch / "uncorrected.onnx"
        quantize(prepared.path, measured, p, calibration, list(prepared.exclude), scratch,
                 overrides=overrides)
        prepared.shifts = measure_shifts(prepared.path, measured, feeds(calibration))
        largest = max((float(np.max(np.abs(v))) for v in prepared.shifts.values()), default=0.0)
        prepared.metadata["bias_correction"] = {
            "layers": len(prepared.shifts), "samples": len(calibration),
            "largest_shift": round(largest, 6)}
    skip = set(exclude)
    chosen = {node: shift for node, shift in prepared.shifts.items()
              if node not in skip and (only is None or node in only)}
    model = onnx.load(str(prepared.path))
    apply_shifts(model, chosen)
    corrected = scratch / "corrected.onnx"
    onnx.save(model, str(corrected))
    return corrected


def corrected_float(prepared: Prepared, destination: Path, p: QuantizeParams,
                    calibration: Samples, scratch: Path) -> None:
    """`emit: corrected-float`: the float model with the biases `p`'s quantization
    corrects, no Q/DQ — for a converter that quantizes itself with the same scheme
    (TFLite full-integer), which has no bias correction of its own."""
    from edgebuild.quant.levers.reduce_range import saturation_overrides

    overrides = saturation_overrides(prepared, p, calibration, scratch)
    corrected = bias_corrected(prepared, p, calibration, prepared.exclude, scratch, None,
                               overrides)
    shutil.copyfile(corrected, destination)
