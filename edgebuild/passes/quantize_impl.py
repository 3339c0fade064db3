"""The work behind the `quantize` pass (imported only inside the worker)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from edgebuild.data.loaders import Samples
from edgebuild.errors import StageError
from edgebuild.passes.layer_compare import compare_layers, first_divergence, worst

if TYPE_CHECKING:
    from edgebuild.passes.base import StageContext
    from edgebuild.passes.quantize import QuantizeParams


def first(samples: Samples, count: int) -> Samples:
    return Samples({k: v[:count] for k, v in samples.inputs.items()},
                   None if samples.labels is None else samples.labels[:count],
                   samples.names[:count])


def feeds(samples: Samples) -> list[dict[str, np.ndarray]]:
    return [samples.feed(i) for i in range(len(samples))]


class _Reader:
    """onnxruntime's CalibrationDataReader protocol over our samples."""

    def __init__(self, samples: Samples) -> None:
        self._feeds = iter(feeds(samples))

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self._feeds, None)

    def rewind(self) -> None:  # some ORT versions call it between calibration passes
        pass


def quantize(source: Path, destination: Path, p: QuantizeParams, calibration: Samples | None,
             exclude: list[str], scratch: Path, only: list[str] | None = None) -> None:
    """Quantize `source`; `only` restricts quantization to those nodes (sensitivity runs).

    Calibration ranges are cached in `scratch`, so the re-quantizations of the
    accuracy-aware search calibrate once.
    """
    from onnxruntime.quantization import (
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quantize_dynamic,
        quantize_static,
    )

    types = {"int8": QuantType.QInt8, "uint8": QuantType.QUInt8}
    if p.mode == "fp16":
        import onnx
        from onnxruntime.transformers.float16 import convert_float_to_float16

        model = convert_float_to_float16(onnx.load(str(source)), keep_io_types=p.keep_io_fp32)
        onnx.save(model, str(destination))
        return
    if p.mode == "dynamic":
        quantize_dynamic(source, destination, per_channel=p.per_channel,
                         reduce_range=p.reduce_range, weight_type=types[p.weight_type],
                         op_types_to_quantize=p.op_types, nodes_to_exclude=exclude,
                         nodes_to_quantize=only)
        return
    assert calibration is not None
    methods = {"minmax": CalibrationMethod.MinMax, "entropy": CalibrationMethod.Entropy,
               "percentile": CalibrationMethod.Percentile}
    extra: dict[str, Any] = {"ActivationSymmetric": p.activation_symmetric,
                             "WeightSymmetric": p.weight_symmetric}
    if p.method == "percentile":
        extra["CalibPercentile"] = p.percentile
    quantize_static(
        source, destination, _Reader(calibration), quant_format=QuantFormat.QDQ,
        op_types_to_quantize=p.op_types, per_channel=p.per_channel, reduce_range=p.reduce_range,
        activation_type=types[p.activation_type], weight_type=types[p.weight_type],
        nodes_to_exclude=exclude, nodes_to_quantize=only,
        calibrate_method=methods[p.method], extra_options=extra,
        calibration_providers=["CPUExecutionProvider"],
        calibration_cache_path=scratch / "calibration-ranges.json",
    )
    for leftover in Path.cwd().glob("augmented_model*.onnx"):  # older ORT writes it to cwd
        leftover.unlink()


def outputs(path: Path, samples: Samples) -> np.ndarray:
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    first_output = session.get_outputs()[0].name
    rows = [session.run([first_output], f)[0].reshape(1, -1) for f in feeds(samples)]
    return np.concatenate(rows).astype(np.float64)


def drop(reference: np.ndarray, candidate: np.ndarray, labels: np.ndarray | None,
         metric: str) -> float:
    """Points lost by `candidate` against the FP32 `reference` on `metric`."""
    if metric == "top1":
        if labels is None:
            raise StageError("accuracy_aware.metric top1 needs a dataset with labels",
                             "use metric: top1_agreement, or a labelled dataset")
        ref = 100.0 * float(np.mean(reference.argmax(1) == labels))
        return ref - 100.0 * float(np.mean(candidate.argmax(1) == labels))
    return 100.0 - 100.0 * float(np.mean(candidate.argmax(1) == reference.argmax(1)))


def accuracy_aware(source: Path, destination: Path, p: QuantizeParams,
                   calibration: Samples | None, evaluation: Samples,
                   scratch: Path) -> dict[str, Any]:
    """Quantize, then keep the most sensitive layers in float until within budget.

    Sensitivity of a layer = output error when that layer alone is quantized
    (isolated_sensitivity). Step k keeps the 2^(k-1) most sensitive layers in
    float (1, 2, 4, ...), so a budget that needs many float layers is found in
    a logarithmic number of re-quantizations.
    """
    assert p.accuracy_aware is not None
    budget = p.accuracy_aware
    started = time.monotonic()
    reference = outputs(source, evaluation)
    trial = scratch / "trial.onnx"
    quantize(source, trial, p, calibration, p.exclude_nodes, scratch)
    probe = feeds(first(calibration if calibration is not None else evaluation, 8))
    deadline = started + budget.max_seconds / 2
    scored = isolated_sensitivity(source, p, calibration, probe, scratch, deadline)
    ranking = [node for node, _ in scored]
    excluded = list(p.exclude_nodes)
    steps: list[dict[str, Any]] = []
    count = 0
    while True:
        lost = drop(reference, outputs(trial, evaluation), evaluation.labels, budget.metric)
        steps.append({"kept_in_float": len(excluded), "drop": round(lost, 4),
                      "seconds": round(time.monotonic() - started, 2)})
        if lost <= budget.max_drop:
            trial.replace(destination)
            return {"steps": steps, "kept_in_float": excluded, "max_drop": budget.max_drop,
                    "metric": budget.metric,
                    "most_sensitive": [{"node": n, "output_error": round(e, 5)}
                                       for n, e in scored[:10]]}
        if len(steps) >= budget.max_iterations or \
                time.monotonic() - started > budget.max_seconds or count >= len(ranking):
            best = min(steps, key=lambda step: step["drop"])
            raise StageError(
                f"accuracy-aware quantization could not reach a {budget.metric} drop of "
                f"{budget.max_drop:g} points: best {best['drop']:.2f} with "
                f"{best['kept_in_float']} layer(s) in float after {len(steps)} step(s) "
                f"({time.monotonic() - started:.0f} s); most sensitive: {ranking[:5]}",
                "raise max_drop, max_iterations or max_seconds, try another calibration "
                "method, or quantize with mode fp16")
        count = max(1, count * 2)
        excluded = list(dict.fromkeys([*p.exclude_nodes, *ranking[:count]]))
        quantize(source, trial, p, calibration, excluded, scratch)


QUANTIZABLE = frozenset({"Conv", "ConvTranspose", "Gemm", "MatMul", "Add", "Mul", "Concat",
                         "GlobalAveragePool", "AveragePool", "Resize", "Sigmoid", "Softmax"})


def isolated_sensitivity(source: Path, p: QuantizeParams, calibration: Samples | None,
                         probe: list[dict[str, np.ndarray]], scratch: Path,
                         deadline: float) -> list[tuple[str, float]]:
    """Quantizable nodes ranked by the output error each causes when quantized alone.

    Error accumulates downstream, so comparing intermediate tensors of a fully
    quantized model blames late layers for early damage; quantizing one node at
    a time measures each node's own effect. Nodes not reached before `deadline`
    keep graph order at the end of the ranking.
    """
    import onnx
    import onnxruntime as ort

    graph = onnx.load(str(source), load_external_data=False).graph
    candidates = [n.name for n in graph.node
                  if n.name and n.op_type in set(p.op_types or QUANTIZABLE)]
    so = ort.SessionOptions()
    so.log_severity_level = 3
    reference_session = ort.InferenceSession(str(source), so, providers=["CPUExecutionProvider"])
    reference = [reference_session.run(None, f)[0] for f in probe]
    one = scratch / "one-node.onnx"
    scores: list[tuple[str, float]] = []
    for node in candidates:
        if time.monotonic() > deadline:
            break
        quantize(source, one, p, calibration, [], scratch, only=[node])
        session = ort.InferenceSession(str(one), so, providers=["CPUExecutionProvider"])
        error = sum(float(np.linalg.norm(session.run(None, f)[0] - ref)) /
                    max(float(np.linalg.norm(ref)), 1e-12) for f, ref in zip(probe, reference,
                                                                               strict=True))
        scores.append((node, error / len(probe)))
    scores.sort(key=lambda item: item[1], reverse=True)
    measured = {node for node, _ in scores}
    return scores + [(node, 0.0) for node in candidates if node not in measured]


def layer_report(source: Path, destination: Path, ctx: StageContext,
                 samples: Samples | None, count: int) -> dict[str, Any]:
    """The per-layer comparison kept in metadata, for reports when an accuracy gate fails."""
    from edgebuild.passes.torch_model import sample_inputs

    if samples is not None:
        chosen = feeds(first(samples, count))
    else:
        chosen = sample_inputs(ctx.recipe["inputs"], seed=0, count=count)
    layers = compare_layers(source, destination, chosen)
    diverged = first_divergence(layers)
    return {
        "samples": len(chosen),
        "first_divergence": diverged.to_json() if diverged else None,
        "worst": [layer.to_json() for layer in worst(layers, 10)],
        "output_error": layers[-1].error if layers else None,
    }
