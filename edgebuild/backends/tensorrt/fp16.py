"""FP16 for a strongly typed TensorRT network: an ONNX model whose types say FP16.

TensorRT 10 deprecated, and 11 removed, the builder flag that let it pick FP16
kernels on its own: a strongly typed network runs each layer in the type the
ONNX gives it. So FP16 is decided here, node by node, with the rules of NVIDIA
Model Optimizer's AutoCast (modelopt.onnx.autocast; its defaults `data_max=512`,
`init_max=65504`, `keep_io_types`):

- a node whose output, on the calibration data run in FP32, exceeds `data_max`
  in magnitude stays FP32 (FP16 overflows at 65504, and products and sums of
  such values get there quickly);
- a node reading an initializer that FP16 cannot hold (|w| > 65504) stays FP32;
- the op types in `keep_ops` stay FP32 (normalizations and reductions whose
  accumulations lose the most in FP16) and so do the named `keep_nodes`;
- graph inputs and outputs stay FP32, so callers feed and read the same types;
- control flow (`If`, `Loop`, `Scan`) stays FP32 with its subgraphs: ONNX Runtime's
  converter cannot convert them (Silero VAD's `If`: a bare `AssertionError` on names its
  two branches share, or a model ONNX Runtime then refuses to load). Where the recipe
  declares the input that decides it constant (`sr`, `value: 16000`), the stage fails
  instead, naming `fold-inputs`: folded, the branch taken converts like the rest.

The casts are inserted by ONNX Runtime's converter (onnxruntime.transformers.
float16), and the result is what ONNX Runtime then runs for the accuracy gate.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgebuild.errors import StageError

if TYPE_CHECKING:
    from edgebuild.core.samples import Samples

FP16_MAX = 65504.0
# Kept FP32 unless the recipe says otherwise: TensorRT itself warns that LayerNorm in
# FP16 may overflow, and reductions / exponentials accumulate error fastest.
SENSITIVE_OPS = ("LayerNormalization", "ReduceMean", "ReduceSum", "ReduceSumSquare",
                 "ReduceL2", "ReduceLogSumExp", "Pow", "Sqrt", "Exp", "Log", "Reciprocal")
# Their subgraphs are not converted (the converter does not descend into a blocked node).
CONTROL_FLOW = ("If", "Loop", "Scan")


def observed_maxima(path: Path, samples: Samples, count: int) -> dict[str, float]:
    """Largest |value| of every float node output over the first `count` samples."""
    import numpy as np
    import onnx
    import onnxruntime as ort

    model = onnx.load(str(path))
    inferred = onnx.shape_inference.infer_shapes(model)
    floats = {v.name for v in [*inferred.graph.value_info, *inferred.graph.output]
              if v.type.tensor_type.elem_type == onnx.TensorProto.FLOAT}
    known = {o.name for o in model.graph.output}
    names = [o for n in model.graph.node for o in n.output if o in floats]
    model.graph.output.extend(onnx.ValueInfoProto(name=n) for n in names if n not in known)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    wanted = [o.name for o in session.get_outputs() if o.name in floats]
    maxima = dict.fromkeys(wanted, 0.0)
    for i in range(min(count, len(samples))):
        for name, value in zip(wanted, session.run(wanted, samples.feed(i)), strict=True):
            if value.size:
                maxima[name] = max(maxima[name], float(np.nanmax(np.abs(value))))
    return maxima


def blocked_nodes(model: Any, maxima: dict[str, float], data_max: float,
                  keep_ops: list[str], keep_nodes: list[str]) -> dict[str, str]:
    """node name -> why it stays FP32."""
    import numpy as np
    from onnx import numpy_helper

    large_inits = {i.name for i in model.graph.initializer
                   if i.data_type == 1 and numpy_helper.to_array(i).size
                   and float(np.abs(numpy_helper.to_array(i)).max()) > FP16_MAX}
    found: dict[str, str] = {}
    for node in model.graph.node:
        if node.op_type in CONTROL_FLOW:
            found[node.name] = (f"{node.op_type}: its subgraphs stay FP32 (ONNX Runtime's "
                                "converter cannot convert them)")
        elif node.op_type in keep_ops:
            found[node.name] = f"{node.op_type} is kept FP32 (keep_ops)"
        elif node.name in keep_nodes:
            found[node.name] = "named in keep_nodes"
        elif any(i in large_inits for i in node.input):
            found[node.name] = "reads a weight FP16 cannot hold (|w| > 65504)"
        else:
            peak = max((maxima.get(o, 0.0) for o in node.output), default=0.0)
            if peak > data_max:
                found[node.name] = f"output reaches {peak:.4g} on the data (> data_max " \
                                   f"{data_max:g})"
    return found


def convert(source: Path, destination: Path, samples: Samples | None, count: int,
            data_max: float, keep_ops: list[str], keep_nodes: list[str],
            declared: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Write the mixed-precision model; returns what stayed FP32 and why. `declared`: the
    recipe's inputs (a control flow they decide as constants is refused, naming
    fold-inputs)."""
    import onnx
    from onnxruntime.transformers.float16 import DEFAULT_OP_BLOCK_LIST, convert_float_to_float16

    model = onnx.load(str(source))
    _refuse_foldable_control_flow(model, declared or [])
    unnamed = [n for n in model.graph.node if not n.name]
    for index, node in enumerate(unnamed):  # the converter blocks nodes by name
        node.name = f"{node.op_type}_{index}__edgebuild"
    maxima = observed_maxima(source, samples, count) if samples is not None else {}
    kept = blocked_nodes(model, maxima, data_max, keep_ops, keep_nodes)
    try:
        converted = convert_float_to_float16(
            model, keep_io_types=True, node_block_list=sorted(kept),
            # Ops ONNX Runtime has no FP16 kernel for stay FP32 too, or the accuracy gate
            # could not run the model; TensorRT would take them in FP16.
            op_block_list=sorted(set(DEFAULT_OP_BLOCK_LIST) | set(keep_ops) | set(CONTROL_FLOW)))
    except Exception as exc:  # its own asserts, often without a message
        raise StageError(
            f"ONNX Runtime's float16 converter failed ({type(exc).__name__}: "
            f"{str(exc).strip()[:300] or 'no message'})",
            "keep the nodes it failed on FP32 (`fp16_keep_nodes`, `fp16_keep_ops`), or build "
            "`precision: fp32`; the stage log has the converter's trace") from exc
    onnx.save(converted, str(destination))
    typed = onnx.shape_inference.infer_shapes(converted)
    half = {v.name for v in [*typed.graph.value_info, *typed.graph.output]
            if v.type.tensor_type.elem_type == onnx.TensorProto.FLOAT16}
    computing = [n for n in converted.graph.node if n.op_type not in ("Cast", "Constant")]
    return {"fp32_nodes": dict(sorted(kept.items())), "nodes": len(computing),
            "fp16_nodes": sum(1 for n in computing if any(o in half for o in n.output)),
            "data_max": data_max,
            "range_samples": min(count, len(samples)) if samples is not None else 0}


def _refuse_foldable_control_flow(model: Any, declared: list[dict[str, Any]]) -> None:
    """Control flow stays FP32 with all it holds; where the recipe declares the input that
    decides it constant, folding it is the better build, so say so before converting."""
    from edgebuild.passes.fold_inputs import fold_hint

    control = [n.name or n.op_type for n in model.graph.node if n.op_type in CONTROL_FLOW]
    if not control:
        return
    hint = fold_hint(model, declared)
    if hint:
        raise StageError(
            f"FP16: ONNX Runtime's float16 converter cannot convert the subgraphs of "
            f"{', '.join(repr(c) for c in control)} (it fails "
            "on them, or writes a model ONNX Runtime cannot load)", hint)


__all__ = ["CONTROL_FLOW", "SENSITIVE_OPS", "blocked_nodes", "convert", "observed_maxima"]
