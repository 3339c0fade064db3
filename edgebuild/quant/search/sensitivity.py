"""Which layers quantization hurts: each candidate quantized alone, judged on the outputs.

`isolated_sensitivity` ranks layers for `accuracy_aware`; `layer_report` is the
per-layer comparison kept in a quantize stage's metadata, whose `culprit` is the layer
whose quantization alone does the most damage to any output channel (not the layer
with the largest local error: a mixed-range output Concat hides behind the Sigmoid
before it). Imported only inside the worker.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from edgebuild.core.share_cpu import yield_when_idle
from edgebuild.data.loaders import Samples
from edgebuild.quant.layer_compare import compare_layers, first_divergence, non_finite, worst
from edgebuild.quant.prepare import quantize_prepared
from edgebuild.quant.prepared import Prepared
from edgebuild.quant.samples import feeds, first

if TYPE_CHECKING:
    from edgebuild.core.op import StageContext
    from edgebuild.quant.params import QuantizeParams


QUANTIZABLE = frozenset({"Conv", "ConvTranspose", "Gemm", "MatMul", "Add", "Mul", "Concat",
                         "GlobalAveragePool", "AveragePool", "Resize", "Sigmoid", "Softmax"})
FUSED_ACTIVATIONS = frozenset({"Relu", "Clip"})


def fused_activations(graph: Any) -> dict[str, list[str]]:
    """Node -> the Relu/Clip that is the only consumer of its output.

    The quantizer folds such an activation into its producer's output range
    (a Clip(0, 6) becomes the range [0, 6]); quantizing the producer without it
    would measure an output range the full model never uses.
    """
    consumers: dict[str, list[Any]] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    found: dict[str, list[str]] = {}
    for node in graph.node:
        users = consumers.get(node.output[0], []) if node.output else []
        if len(users) == 1 and users[0].op_type in FUSED_ACTIVATIONS and users[0].name:
            found[node.name] = [users[0].name]
    return found


def isolated_sensitivity(prepared: Prepared, p: QuantizeParams, calibration: Samples | None,
                         probe: list[dict[str, np.ndarray]], scratch: Path,
                         deadline: float) -> list[tuple[str, float]]:
    """Quantizable nodes ranked by the output error each causes when quantized alone.

    Error accumulates downstream, so comparing intermediate tensors of a fully
    quantized model blames late layers for early damage; quantizing one node at
    a time (with the activation folded into it) measures each node's own
    effect, on the real integer kernels. Nodes not reached before `deadline`
    keep graph order at the end of the ranking.
    """
    import onnx
    import onnxruntime as ort

    graph = onnx.load(str(prepared.path), load_external_data=False).graph
    candidates = [n.name for n in graph.node
                  if n.name and n.op_type in set(p.op_types or QUANTIZABLE)]
    activations = fused_activations(graph)
    so = ort.SessionOptions()
    so.log_severity_level = 3
    yield_when_idle(so)  # times nothing: idle threads sleep beside other work
    reference_session = ort.InferenceSession(str(prepared.source), so,
                                             providers=["CPUExecutionProvider"])
    reference = [reference_session.run(None, f)[0] for f in probe]
    one = scratch / "one-node.onnx"
    scores: list[tuple[str, float]] = []
    for node in candidates:
        if time.monotonic() > deadline:
            break
        quantize_prepared(prepared, one, p, calibration, [], scratch,
                          only=[node, *activations.get(node, [])])
        session = ort.InferenceSession(str(one), so, providers=["CPUExecutionProvider"])
        error = sum(float(np.linalg.norm(session.run(None, f)[0] - ref)) /
                    max(float(np.linalg.norm(ref)), 1e-12) for f, ref in zip(probe, reference,
                                                                               strict=True))
        scores.append((node, error / len(probe)))
    scores.sort(key=lambda item: item[1], reverse=True)
    measured = {node for node, _ in scores}
    return scores + [(node, 0.0) for node in candidates if node not in measured]


def layer_report(source: Path, destination: Path, ctx: StageContext,
                 samples: Samples | None, count: int, prepared: Prepared | None = None,
                 p: QuantizeParams | None = None, scratch: Path | None = None
                 ) -> dict[str, Any]:
    """The per-layer comparison kept in metadata, for reports when an accuracy gate fails.

    `worst` ranks layers by the error each adds over its inputs (local); with
    `prepared` (INT8), `sensitivity` ranks the candidates by what quantizing each
    *alone* does to the graph outputs, and `culprit` is the first of them.
    """
    from edgebuild.core.generated import sample_inputs

    if samples is not None:
        chosen = feeds(first(samples, count))
    else:
        chosen = sample_inputs(ctx.io.inputs, seed=0, count=count)
    layers = compare_layers(source, destination, chosen)
    diverged = first_divergence(layers)
    report: dict[str, Any] = {
        "samples": len(chosen),
        "first_divergence": diverged.to_json() if diverged else None,
        "worst": [layer.to_json() for layer in worst(layers, 10)],
        "non_finite": [layer.to_json() for layer in non_finite(layers)],
        "output_error": layers[-1].error if layers and layers[-1].finite else None,
    }
    if prepared is not None and p is not None and scratch is not None and p.mode != "fp16":
        ranked = output_sensitivity(prepared, p, samples, chosen, layers, scratch)
        report["sensitivity"] = ranked
        report["culprit"] = ranked[0] if ranked else None
    return report


def _by_output(runs: list[list[np.ndarray]]) -> list[np.ndarray]:
    """Each output over the runs, concatenated on axis 0; empty where its shape varies
    between runs (after NMS), which worst_slice_error then skips."""
    stacked = []
    for k in range(len(runs[0]) if runs else 0):
        values = [np.asarray(run[k]) for run in runs]
        same = len({v.shape for v in values}) == 1 and values[0].ndim > 0
        stacked.append(np.concatenate(values) if same else np.zeros(0))
    return stacked


SENSITIVITY_ALL = 16  # measure every candidate up to this many; else the top by local error
SENSITIVITY_TOP = 8


def output_sensitivity(prepared: Prepared, p: QuantizeParams, calibration: Samples | None,
                       probe: list[dict[str, np.ndarray]], layers: list[Any],
                       scratch: Path) -> list[dict[str, Any]]:
    """Candidates ranked by the worst per-channel output error when quantized alone.

    Local error misleads twice: a layer's error shows up downstream of it, and a
    whole-tensor error of a mixed-range output (box pixels beside 0-1 scores) is
    dominated by the wide part. So each candidate — every quantized node when
    there are few, else the top by local error plus the producers of the graph
    outputs — is quantized alone (with the Relu/Clip folded into it) and judged by
    the largest relative error of any output channel (safety.worst_slice_error).
    """
    import onnx
    import onnxruntime as ort

    from edgebuild.quant.safety import worst_slice_error

    graph = onnx.load(str(prepared.path), load_external_data=False).graph
    allowed = set(p.op_types or QUANTIZABLE)
    excluded = set(prepared.exclude)
    quantized = {n.name: n.op_type for n in graph.node
                 if n.name and n.op_type in allowed and n.name not in excluded}
    if len(quantized) <= SENSITIVITY_ALL:
        candidates = list(quantized)
    else:
        outputs = {o.name for o in graph.output}
        by_local = [layer.node for layer in worst(layers, len(layers))
                    if layer.node in quantized]
        last = [n.name for n in graph.node if n.name in quantized and
                any(o in outputs for o in n.output)]
        candidates = list(dict.fromkeys([*by_local[:SENSITIVITY_TOP], *last]))
    so = ort.SessionOptions()
    so.log_severity_level = 3
    yield_when_idle(so)  # times nothing: idle threads sleep beside other work
    fp32 = ort.InferenceSession(str(prepared.source), so, providers=["CPUExecutionProvider"])
    reference = [fp32.run(None, feed) for feed in probe]
    activations = fused_activations(graph)
    local = {layer.node: layer.added for layer in layers if layer.finite}
    one = scratch / "sensitivity.onnx"
    ranked: list[dict[str, Any]] = []
    for node in candidates:
        quantize_prepared(prepared, one, p, calibration, [], scratch,
                          only=[node, *activations.get(node, [])])
        session = ort.InferenceSession(str(one), so, providers=["CPUExecutionProvider"])
        got = [session.run(None, feed) for feed in probe]
        error, where = worst_slice_error(_by_output(reference), _by_output(got))
        entry: dict[str, Any] = {"node": node, "op_type": quantized[node],
                                 "output_error": round(error, 6), "where": where}
        if node in local:
            entry["local_added"] = round(local[node], 6)
        ranked.append(entry)
    ranked.sort(key=lambda entry: entry["output_error"], reverse=True)
    return ranked
