"""The work behind the `quantize` pass (imported only inside the worker)."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from edgebuild.data.loaders import Samples
from edgebuild.errors import StageError

if TYPE_CHECKING:
    from edgebuild.passes.quantize import QuantizeParams


def first(samples: Samples, count: int) -> Samples:
    return Samples({k: v[:count] for k, v in samples.inputs.items()},
                   None if samples.labels is None else samples.labels[:count],
                   samples.names[:count],
                   None if samples.boxes is None else samples.boxes[:count],
                   samples.unbatched, samples.steps)


def feeds(samples: Samples) -> list[dict[str, np.ndarray]]:
    return [samples.feed(i) for i in range(len(samples))]


def first_steps(samples: Samples, count: int) -> list[dict[str, np.ndarray]]:
    """The first `count` calls' inputs: samples, or a stream's first windows, each with
    its sequence's own state inputs (the initial state: a probe, not an evaluation)."""
    if samples.steps is None:
        return feeds(first(samples, count))
    found: list[dict[str, np.ndarray]] = []
    for index in range(len(samples)):
        whole = samples.sequence(index)
        for window in samples.steps.windows(whole[samples.steps.input]):
            found.append({**whole, samples.steps.input: window})
            if len(found) == count:
                return found
    return found


class _Reader:
    """onnxruntime's CalibrationDataReader protocol over our samples."""

    def __init__(self, samples: Samples) -> None:
        self._all = list(feeds(samples))
        self._feeds = iter(self._all)

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self._feeds, None)

    def rewind(self) -> None:  # some ORT versions call it between calibration passes
        pass

    def __len__(self) -> int:
        return len(self._all)

    def set_range(self, start_index: int, end_index: int) -> None:
        """ORT's strided calibration: collect from these samples only."""
        self._feeds = iter(self._all[start_index:end_index])


@dataclass
class Prepared:
    """The float model the quantizer sees, after the float-side levers.

    `path` is the source, or its equalized copy; `shifts` (bias correction,
    per node) are measured on the first quantization and then applied to the
    nodes each later quantization actually quantizes: a layer kept in float
    keeps its own bias.
    """

    source: Path
    path: Path
    metadata: dict[str, Any] = field(default_factory=dict)
    shifts: dict[str, np.ndarray] | None = None
    reduced: dict[str, Any] | None = None  # reduce_range auto: TensorQuantOverrides
    exclude: list[str] = field(default_factory=list)  # kept float: exclude_nodes + the rules


def prepare(source: Path, p: QuantizeParams, calibration: Samples | None,
            scratch: Path) -> Prepared:
    """Apply cross-layer equalization (if asked) and record what it did."""
    scratch.mkdir(parents=True, exist_ok=True)
    if p.equalize is None:
        return _with_float_nodes(Prepared(source, source), p, calibration)
    import onnx

    from edgebuild.passes import equalize as eq

    model = onnx.load(str(source))
    upper: dict[str, np.ndarray] | None = None
    if p.equalize.clip == "exact":
        assert calibration is not None
        ranges = {name: (x.min(axis=_not_channel(x)), x.max(axis=_not_channel(x)))
                  for name, x in calibration.inputs.items()}
        upper = {k: hi for k, (_, hi) in eq.interval_bounds(model, ranges).items()}
    elif p.equalize.clip == "calibrated":
        assert calibration is not None
        upper = _observed_maxima(source, [pair.tensor for pair in eq.find_pairs(model)],
                                 calibration)
    result = eq.equalize(model, p.equalize.clip, p.equalize.max_iterations, upper)
    path = scratch / "equalized.onnx"
    onnx.save(model, str(path))
    summary = result.to_json()
    probe = calibration if calibration is not None else None
    if probe is not None:
        a, b = outputs(source, first(probe, 8)), outputs(path, first(probe, 8))
        summary["fp32_max_abs_diff"] = float(np.max(np.abs(a - b)))
        summary["fp32_top1_agreement"] = 100.0 * float(np.mean(a.argmax(1) == b.argmax(1)))
    return _with_float_nodes(Prepared(source, path, {"equalize": summary}), p, calibration)


RANGE_SAMPLES = 32


def _with_float_nodes(prepared: Prepared, p: QuantizeParams,
                      calibration: Samples | None) -> Prepared:
    """Decide which nodes stay float on every quantization of this stage (int8_safety.py)."""
    if p.mode == "fp16":
        prepared.exclude = list(p.exclude_nodes)
        return prepared
    import onnx

    from edgebuild.passes.int8_safety import float_nodes

    probe = None if calibration is None else feeds(first(calibration, RANGE_SAMPLES))
    chosen = float_nodes(onnx.load(str(prepared.path)), probe, p.keep_float.value,
                         p.mixed_range_bound, p.exclude_nodes, p.op_types)
    if p.preset == "tensorrt":
        chosen.notes.append("TensorRT runs the float nodes at the engine's float precision "
                            "(fp16 where the build allows it)")
    prepared.exclude = chosen.names
    prepared.metadata["kept_float"] = chosen.to_json()
    if calibration is not None:
        from edgebuild.passes.score_range import record

        # every calibration sample: one confident image is enough to calibrate the scores
        scores = record(onnx.load(str(prepared.source)), feeds(calibration))
        if scores is not None:
            prepared.metadata["score_range"] = scores
    return prepared


def _not_channel(x: np.ndarray) -> tuple[int, ...]:
    """Every axis but 1 (N C ...), or but the last for N×F inputs."""
    return tuple(i for i in range(x.ndim) if i != (1 if x.ndim > 2 else x.ndim - 1))


def _exposing_session(model: Any, tensors: list[str]) -> Any:
    """An unoptimized ONNX Runtime session of `model` that also outputs `tensors`
    (optimizations would fuse some of them away)."""
    import onnx
    import onnxruntime as ort

    for name in tensors:
        model.graph.output.append(onnx.helper.make_tensor_value_info(
            name, onnx.TensorProto.FLOAT, None))
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), so,
                                providers=["CPUExecutionProvider"])


def _observed_maxima(path: Path, tensors: list[str], samples: Samples) -> dict[str, np.ndarray]:
    """Per-channel largest value of each of `tensors` over `samples` (FP32 model)."""
    import onnx

    session = _exposing_session(onnx.load(str(path)), tensors)
    maxima: dict[str, np.ndarray] = {}
    for feed in feeds(samples):
        for name, value in zip(tensors, session.run(tensors, feed), strict=True):
            channel_max = np.asarray(value).max(axis=_not_channel(np.asarray(value)))
            maxima[name] = np.maximum(maxima[name], channel_max) if name in maxima \
                else channel_max
    return maxima


def quantize_prepared(prepared: Prepared, destination: Path, p: QuantizeParams,
                      calibration: Samples | None, exclude: list[str], scratch: Path,
                      only: list[str] | None = None) -> None:
    """`quantize` from the prepared float model, with reduce_range auto and bias correction."""
    overrides = _saturation_overrides(prepared, p, calibration, scratch)
    source = prepared.path
    if p.bias_correction and calibration is not None:
        source = _bias_corrected(prepared, p, calibration, exclude, scratch, only, overrides)
    quantize(source, destination, p, calibration, exclude, scratch, only, overrides)


def corrected_float(prepared: Prepared, destination: Path, p: QuantizeParams,
                    calibration: Samples, scratch: Path) -> None:
    """`emit: corrected-float`: the float model with the biases `p`'s quantization
    corrects (bias_correction.py), no Q/DQ — for a converter that quantizes itself with
    the same scheme (TFLite full-integer), which has no bias correction of its own."""
    overrides = _saturation_overrides(prepared, p, calibration, scratch)
    corrected = _bias_corrected(prepared, p, calibration, prepared.exclude, scratch, None,
                                overrides)
    shutil.copyfile(corrected, destination)


def _bias_corrected(prepared: Prepared, p: QuantizeParams, calibration: Samples,
                    exclude: list[str], scratch: Path, only: list[str] | None,
                    overrides: dict[str, Any]) -> Path:
    """The float model with the measured shifts of the quantized layers subtracted."""
    import onnx

    from edgebuild.passes import bias_correction as bc

    if prepared.shifts is None:
        measured = scratch / "uncorrected.onnx"
        quantize(prepared.path, measured, p, calibration, list(prepared.exclude), scratch,
                 overrides=overrides)
        prepared.shifts = bc.measure_shifts(prepared.path, measured, feeds(calibration))
        largest = max((float(np.max(np.abs(v))) for v in prepared.shifts.values()), default=0.0)
        prepared.metadata["bias_correction"] = {
            "layers": len(prepared.shifts), "samples": len(calibration),
            "largest_shift": round(largest, 6)}
    skip = set(exclude)
    chosen = {node: shift for node, shift in prepared.shifts.items()
              if node not in skip and (only is None or node in only)}
    model = onnx.load(str(prepared.path))
    bc.apply_shifts(model, chosen)
    corrected = scratch / "corrected.onnx"
    onnx.save(model, str(corrected))
    return corrected


SATURATION_SAMPLES = 8


def _saturation_overrides(prepared: Prepared, p: QuantizeParams, calibration: Samples | None,
                          scratch: Path) -> dict[str, Any]:
    """reduce_range auto: 7-bit weights (TensorQuantOverrides) where u8s8 pairs overflow."""
    if p.reduce_range != "auto" or calibration is None:
        return {}
    if prepared.reduced is None:
        import onnx

        from edgebuild.passes.qdq_graph import u8s8_saturation

        probe = scratch / "saturation-probe.onnx"
        quantize(prepared.path, probe, p, calibration, list(prepared.exclude), scratch)
        model = onnx.load(str(probe))
        wanted = [n.input[0] for n in model.graph.node if n.op_type == "QuantizeLinear"]
        values = _tensor_values(prepared.path, wanted, first(calibration, SATURATION_SAMPLES))
        rates = u8s8_saturation(model, values)
        source = onnx.load(str(prepared.path), load_external_data=False).graph
        nodes = {n.name: n for n in source.node if len(n.input) > 1}
        over = sorted(node for node, rate in rates.items() if rate > p.saturation_tolerance)
        prepared.reduced = {nodes[node].input[1]: [{"axis": _weight_axis(nodes[node]),
                                                    "reduce_range": True}]
                            for node in over if node in nodes}
        prepared.metadata["reduce_range_auto"] = {
            "tolerance": p.saturation_tolerance, "reduced": over,
            "overflow_rate": {node: float(f"{rate:.3g}") for node, rate in rates.items()}}
    return prepared.reduced


def _weight_axis(node: Any) -> int:
    """The output-channel axis of a Conv or Gemm weight (per-channel scales run along it)."""
    if node.op_type == "Gemm":
        return 0 if any(a.name == "transB" and a.i for a in node.attribute) else 1
    return 0


def _tensor_values(path: Path, names: list[str], samples: Samples) -> dict[str, np.ndarray]:
    """Float values of the graph inputs and intermediate tensors `names` over `samples`."""
    import onnx

    model = onnx.load(str(path))
    produced = {o for n in model.graph.node for o in n.output}
    inner = [n for n in dict.fromkeys(names) if n in produced]
    session = _exposing_session(model, inner)
    runs = [session.run(inner, feed) for feed in feeds(samples)]
    # atleast_1d: a scalar tensor (a constant folded to rank 0) concatenates as one value
    values = {name: np.concatenate([np.atleast_1d(run[i]) for run in runs])
              for i, name in enumerate(inner)}
    values.update({k: v for k, v in samples.inputs.items() if k in names})
    return values


def quantize(source: Path, destination: Path, p: QuantizeParams, calibration: Samples | None,
             exclude: list[str], scratch: Path, only: list[str] | None = None,
             overrides: dict[str, Any] | None = None) -> None:
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

    types = {"int8": QuantType.QInt8, "uint8": QuantType.QUInt8, "uint16": QuantType.QUInt16}
    if p.mode == "fp16":
        import onnx
        from onnxruntime.transformers.float16 import convert_float_to_float16

        model = convert_float_to_float16(onnx.load(str(source)), keep_io_types=p.keep_io_fp32)
        onnx.save(model, str(destination))
        return
    if p.engine == "aimet":
        from edgebuild.passes import quantize_aimet

        assert calibration is not None
        quantize_aimet.quantize(source, destination, p, calibration, exclude, only)
        _keep_float_layers_float(destination)
        return
    from edgebuild.passes.quantize import PRESET_EXTRA

    preset = PRESET_EXTRA.get(p.preset or "", {})
    if p.mode == "dynamic":
        quantize_dynamic(source, destination, per_channel=p.per_channel,
                         reduce_range=p.reduce_range is True, weight_type=types[p.weight_type],
                         op_types_to_quantize=p.op_types, nodes_to_exclude=exclude,
                         nodes_to_quantize=only,
                         extra_options={**preset, **p.ort_extra_options})
        return
    assert calibration is not None
    methods = {"minmax": CalibrationMethod.MinMax, "entropy": CalibrationMethod.Entropy,
               "percentile": CalibrationMethod.Percentile}
    extra: dict[str, Any] = {**preset, **p.ort_extra_options,
                             "ActivationSymmetric": p.activation_symmetric,
                             "WeightSymmetric": p.weight_symmetric,
                             "QDQKeepRemovableActivations": p.keep_activations,
                             "DedicatedQDQPair": p.dedicated_qdq_pair}
    if overrides:
        extra["TensorQuantOverrides"] = {**overrides, **extra.get("TensorQuantOverrides", {})}
    if p.method == "percentile":
        extra["CalibPercentile"] = p.percentile
    if p.method != "minmax" or not extra.get("CalibMovingAverage"):
        # One sample per collection, ranges (or histograms) merged between them: min of
        # mins and max of maxes are the same ranges. ORT otherwise holds every
        # intermediate tensor of every sample at once (22.6 GB for 6 pages through
        # PP-PicoDet at 800 x 608, killed by the kernel; its CalibMaxIntermediateOutputs
        # drops the data instead, onnxruntime 1.32), and stacking a tensor's values over
        # the samples of one collection fails when its shape varies (NMS keeps a
        # different number of boxes per image; calibration at several shape profiles).
        extra.setdefault("CalibStridedMinMax", 1)
    from edgebuild.passes.ort_histograms import streamed_histograms

    try:
        with streamed_histograms():
            quantize_static(
                source, destination, _Reader(calibration), quant_format=QuantFormat.QDQ,
                op_types_to_quantize=p.op_types, per_channel=p.per_channel,
                reduce_range=p.reduce_range is True,
                activation_type=types[p.activation_type], weight_type=types[p.weight_type],
                nodes_to_exclude=exclude, nodes_to_quantize=only,
                calibrate_method=methods[p.method], extra_options=extra,
                calibration_providers=["CPUExecutionProvider"],
                calibration_cache_path=scratch / "calibration-ranges.json",
            )
    except ValueError as exc:
        if "Quantization parameters are not specified" not in str(exc):
            raise
        raise StageError(
            f"calibration gave no values for a tensor to quantize ({str(exc).split(chr(10))[0]})",
            "it was empty on every calibration sample, as after a NonMaxSuppression that keeps "
            "no box: calibrate on images where the model detects something, or keep the "
            "post-processing in float (quantize.op_types, exclude_nodes)") from exc
    for leftover in Path.cwd().glob("augmented_model*.onnx"):  # older ORT writes it to cwd
        leftover.unlink()
    if p.preset != "tensorrt":  # per-axis activation DQ is ONNX Runtime's fix, not TensorRT's
        _keep_float_layers_float(destination)


def guarded_layers(path: Path) -> list[str]:
    """The float layers `_keep_float_layers_float` protected in the model at `path`."""
    import onnx

    graph = onnx.load(str(path), load_external_data=False).graph
    return [n.name.removesuffix("__float_dq") for n in graph.node
            if n.name.endswith("__float_dq")]


def _keep_float_layers_float(path: Path) -> None:
    """Stop ONNX Runtime from re-quantizing the layers left in float (qdq_graph.py)."""
    import onnx

    from edgebuild.passes.qdq_graph import keep_float_layers_float

    model = onnx.load(str(path))
    if keep_float_layers_float(model):
        onnx.save(model, str(path))


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


def accuracy_aware(prepared: Prepared, destination: Path, p: QuantizeParams,
                   calibration: Samples | None, evaluation: Samples,
                   scratch: Path) -> dict[str, Any]:
    """Quantize, then keep the most sensitive layers in float until the drop is within
    `accuracy_aware.max_drop` (keep_float_search)."""
    assert p.accuracy_aware is not None
    budget = p.accuracy_aware
    reference = outputs(prepared.source, evaluation)

    def check(path: Path) -> Verdict:
        lost = drop(reference, outputs(path, evaluation), evaluation.labels, budget.metric)
        return Verdict(lost <= budget.max_drop, -lost, {"drop": round(lost, 4)})

    found = keep_float_search(prepared, destination, p, calibration, evaluation, scratch,
                              check, budget.max_iterations, budget.max_seconds)
    if not found.met:
        best_step = max(found.steps, key=lambda step: step["score"])
        raise StageError(
            f"accuracy-aware quantization could not reach a {budget.metric} drop of "
            f"{budget.max_drop:g} points: best {best_step['drop']:.2f} with "
            f"{best_step['kept_in_float']} layer(s) in float after {len(found.steps)} "
            f"step(s) ({found.seconds:.0f} s); most sensitive: {found.ranking[:5]}",
            "raise max_drop, max_iterations or max_seconds, try another calibration "
            "method, bias_correction, or quantize with mode fp16")
    return {**found.to_json(), "max_drop": budget.max_drop, "metric": budget.metric}


@dataclass
class Verdict:
    """One trial's outcome: passed, a score (higher is better) and what to record."""

    passed: bool
    score: float
    record: dict[str, Any] = field(default_factory=dict)


@dataclass
class KeptFloat:
    """What keep_float_search tried and found."""

    met: bool
    steps: list[dict[str, Any]]
    kept: list[str]
    scored: list[tuple[str, float]]
    seconds: float
    stopped: str = ""  # why a search that found nothing ended: iterations, seconds, layers

    @property
    def ranking(self) -> list[str]:
        return [node for node, _ in self.scored]

    def to_json(self) -> dict[str, Any]:
        return {"steps": [{k: v for k, v in step.items() if k != "score"}
                          for step in self.steps],
                "kept_in_float": self.kept,
                **({"stopped": self.stopped} if self.stopped else {}),
                "most_sensitive": [{"node": n, "output_error": round(e, 5)}
                                   for n, e in self.scored[:10]]}


def keep_float_search(prepared: Prepared, destination: Path, p: QuantizeParams,
                      calibration: Samples | None, evaluation: Samples, scratch: Path,
                      check: Callable[[Path], Verdict], max_iterations: int,
                      max_seconds: float) -> KeptFloat:
    """Quantize, then keep the most sensitive layers in float until `check` passes.

    Sensitivity of a layer = output error when that layer alone is quantized
    (isolated_sensitivity). Step k keeps the 2^(k-1) most sensitive layers in
    float (1, 2, 4, ...), so a budget that needs many float layers is found in
    a logarithmic number of re-quantizations; bisection between the last count
    that failed and the first that passed then finds the fewest, as far as the
    iteration and time bounds allow. The model written to `destination` is the
    passing one with the fewest float layers; when none passed, the best scored.
    """
    started = time.monotonic()
    trial, best, best_failed = scratch / "trial.onnx", scratch / "best.onnx", \
        scratch / "best-failed.onnx"
    steps: list[dict[str, Any]] = []
    ranking: list[str] = []

    def passes(count: int) -> bool:
        excluded = list(dict.fromkeys([*prepared.exclude, *ranking[:count]]))
        quantize_prepared(prepared, trial, p, calibration, excluded, scratch)
        verdict = check(trial)
        if verdict.passed:
            shutil.copyfile(trial, best)
        elif all(verdict.score > step["score"] for step in steps if not step["passed"]):
            shutil.copyfile(trial, best_failed)
        steps.append({"kept_in_float": len(excluded), **verdict.record,
                      "passed": verdict.passed, "score": verdict.score,
                      "seconds": round(time.monotonic() - started, 2)})
        return verdict.passed

    def exhausted() -> bool:
        return len(steps) >= max_iterations or time.monotonic() - started > max_seconds

    scored: list[tuple[str, float]] = []
    low, high = 0, 0
    if not passes(0):
        probe = (feeds(first(calibration, 8)) if calibration is not None
                 else first_steps(evaluation, 8))
        deadline = started + max_seconds / 2
        from edgebuild.passes.quantize_sensitivity import isolated_sensitivity

        scored = isolated_sensitivity(prepared, p, calibration, probe, scratch, deadline)
        ranking = [node for node, _ in scored if node not in prepared.exclude]
        count = 1
        while True:
            if exhausted() or low >= len(ranking):
                shutil.copyfile(best_failed, destination)
                stopped = ("layers" if low >= len(ranking) else
                           "iterations" if len(steps) >= max_iterations else "seconds")
                return KeptFloat(False, steps, [], scored, time.monotonic() - started,
                                 stopped)
            if passes(count):
                high = count
                break
            low, count = count, min(count * 2, len(ranking))
        while high - low > 1 and not exhausted():
            middle = (low + high) // 2
            if passes(middle):
                high = middle
            else:
                low = middle
    best.replace(destination)
    kept = list(dict.fromkeys([*prepared.exclude, *ranking[:high]]))
    return KeptFloat(True, steps, kept, scored, time.monotonic() - started)
