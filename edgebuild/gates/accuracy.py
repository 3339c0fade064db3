"""Accuracy: run the compiled artifact on a dataset, then compare with labels / FP32.

The `infer` stage stores outputs; the metrics are computed when gates are
evaluated, so changing a limit in the recipe re-evaluates without re-running.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgebuild.core.op import Op, OpResult, StageContext
from edgebuild.core.target import Target
from edgebuild.gates.fidelity import (
    NEAR_ZERO_ABS,
    NEAR_ZERO_REL,
    PSNR_CAP_DB,
    Comparison,
    blind_part,
    decided_agreement,
    non_finite,
    per_channel,
    take,
    value_metrics,
)
from edgebuild.gates.reference import DatasetParams, save_outputs
from edgebuild.gates.sequence import (
    SequenceOptions,
    ctc_metrics,
    decision_metrics,
    flattened_classes,
    out_of_range,
    positions,
)
from edgebuild.registry import backend_tools, load_backend

if TYPE_CHECKING:
    import numpy as np

    from edgebuild.recipe.models import OutputSlice

__all__ = ["NEAR_ZERO_ABS", "NEAR_ZERO_REL", "PSNR_CAP_DB", "Comparison", "Infer",
           "accuracy_metrics", "compare"]


class Infer(Op):
    name = "infer"
    version = 3
    Params = DatasetParams
    accepts = ("*",)
    produces = "outputs"
    target_specific = True
    probes = "accuracy"
    summary = "run the compiled artifact on an evaluation dataset"

    def tool_names(self, target: Target | None) -> tuple[str, ...]:
        assert target is not None
        return (*backend_tools(target.backend), "numpy", "pillow")

    def run(self, ctx: StageContext, params: Any) -> OpResult:
        assert ctx.target is not None
        backend = load_backend(ctx.target.backend)
        reason = backend.unmeasurable_reason(ctx.target, "accuracy")
        if reason:
            return OpResult(main="", format="outputs", unmeasurable=reason)
        from edgebuild.data.stream import evaluate, first_feeds, stream_summary

        samples = ctx.dataset(params.dataset)
        threads = ctx.target.measure.threads
        with backend.runner(ctx.input(), ctx.target, threads) as runner:
            where = runner.label(backend.where(ctx.target, "accuracy"))
            if len(samples):  # a dataset at another size than the example: resize first
                runner.reshape({n: list(a.shape) for n, a in first_feeds(samples).items()})
            # one call per sample, or per step of a stream with this build's own state
            outputs = evaluate(samples, ctx.io.state, runner.infer)
        save_outputs(ctx.out / "outputs.npz", outputs, samples,
                     {p["output"] for p in ctx.io.state})
        return OpResult(main="outputs.npz", format="outputs",
                        metadata={**stream_summary(samples, outputs),
                                  "dataset": params.dataset, "where": where})


def _output(path: Path, output: str | None) -> tuple[np.ndarray, np.ndarray | None, str]:
    """One output of a stored outputs file, as stored (samples × the output's axes), the
    labels, and the output's name (the first output's, without `output`)."""
    import numpy as np

    with np.load(path) as archive:
        stored = [k.removeprefix("output:") for k in archive.files if k.startswith("output:")]
        name = output if output is not None else stored[0]
        if name not in stored:
            raise ValueError(f"the model produced no output '{name}' (it has {stored})")
        values = archive[f"output:{name}"]
        labels = archive["labels"] if "labels" in archive.files else None
        return values.astype(np.float64), labels, name


def accuracy_metrics(candidate: Path, reference: Path, output: str | None = None,
                     task: str = "classification") -> dict[str, float]:
    """Every metric the gate can check on one whole output (see `compare`)."""
    return compare(candidate, reference, output, task).metrics


def compare(candidate: Path, reference: Path, output: str | None = None,
            task: str = "classification", *, part: OutputSlice | None = None,
            channel_axis: int | str | None = None, margin: float | None = None,
            scaled_limits: dict[str, float] | None = None,
            sequence: SequenceOptions | None = None,
            rows: int | None = None) -> Comparison:
    """The metrics of one output (or `part` of it) against FP32, and what explains them.

    Comparisons with FP32 are per sample, so one sample cannot hide another's error;
    class metrics (top-k, agreement) only for a classification output, where an
    argmax means something. A NaN or Inf gives only its counts (`non_finite_values`):
    no figure computed over it means anything. `channel_axis`: cosine, relative error
    and PSNR per channel, the worst one gated. `scaled_limits` (min_cosine,
    max_relative_error, min_psnr on the whole output): refused with `blind` in the
    details when FP32 with its small-range channels zeroed would pass them.
    `sequence`: the class axis (per-position agreement), CTC decoding, a decision
    threshold and the range check (gates/sequence.py). `rows`: the calls the outputs
    came from; an output with another row count has no sample axis, and is refused
    rather than compared as if its first axis were the samples.
    """
    import numpy as np

    options = sequence or SequenceOptions()
    got, labels, name = _output(candidate, output)
    ref, _, _ = _output(reference, output)
    if rows is not None and len(got) != rows:
        raise ValueError(
            f"output '{output or 'the first'}' has {len(got)} rows for {rows} samples: it "
            f"has no sample "
            f"axis (a recurrent state [2, 1, 128] concatenates to 2 rows a sample), so its "
            f"first axis is not the samples. Declare it in `state:` with the input it "
            f"feeds, and it is compared one sample (one step) at a time")
    if got.shape != ref.shape:
        raise ValueError(f"output shape {got.shape} differs from the reference {ref.shape}")
    got, ref = take(got, part), take(ref, part)
    metrics: dict[str, float] = {"samples": float(len(got))}
    for who, values in (("candidate", got), ("reference", ref)):
        bad = non_finite(values)
        if bad is not None:
            metrics.update({"non_finite_values": float(bad["values"]),
                            "non_finite_samples": float(bad["samples"])})
            return Comparison(metrics, {"non_finite": {**bad, "in": who}})
    details: dict[str, Any] = {} if output is not None else {"output_name": name}
    if options.range_tolerance is not None:
        left = out_of_range(got, ref, options.range_tolerance)
        if left is not None:
            metrics["out_of_range_values"] = float(left["values"])
            details["out_of_range"] = left
    if isinstance(channel_axis, int):
        found = per_channel(got, ref, channel_axis)
        metrics.update(found.metrics)
        details.update(found.details)
    else:
        metrics.update(value_metrics(got, ref))
        blind = (blind_part(ref, task, scaled_limits or {})
                 if channel_axis is None else None)
        if blind is not None:
            details["blind"] = blind
    if options.threshold is not None:
        metrics.update(decision_metrics(got, ref, options.threshold))
        if options.regions:
            from edgebuild.gates.regions import region_metrics

            found_regions, said = region_metrics(got, ref, options.threshold,
                                                 options.peak_threshold)
            metrics.update(found_regions)
            details.update(said)
    if task == "ctc":
        found = ctc_metrics(got, ref, -1 if options.class_axis is None else options.class_axis,
                            options.blank, labels, options.trim)
        metrics.update(found.metrics)
        details.update(found.details)
        return Comparison(metrics, details)
    if task != "classification":
        return Comparison(metrics, details)
    if options.class_axis is not None:
        count = len(got)
        got, ref = positions(got, options.class_axis), positions(ref, options.class_axis)
        metrics["positions"] = float(len(got) // max(count, 1))
        labels = labels.reshape(-1) if labels is not None and labels.size == len(got) else None
    else:
        flattened_classes(got)
    got, ref = got.reshape(len(got), -1), ref.reshape(len(ref), -1)
    top1 = got.argmax(axis=1)
    ref_top1 = ref.argmax(axis=1)
    metrics["classes"] = float(got.shape[1])
    metrics["top1_agreement"] = 100.0 * float(np.mean(top1 == ref_top1))
    if got.shape[1] >= 2:
        flips = decided_agreement(got, ref, margin)
        metrics.update(flips.metrics)
        details.update(flips.details)
    elif margin is not None:
        raise ValueError("decided agreement needs two classes or more to have a top-2")
    if labels is not None:
        labels = _checked_labels(labels, got.shape[1])
        metrics["top1"] = 100.0 * float(np.mean(top1 == labels))
        metrics["reference_top1"] = 100.0 * float(np.mean(ref_top1 == labels))
        metrics["top1_drop"] = metrics["reference_top1"] - metrics["top1"]
        if got.shape[1] > 5:  # with 5 classes or fewer, top-5 is 100 % whatever the model
            top5 = np.argpartition(-got, 4, axis=1)[:, :5]
            metrics["top5"] = 100.0 * float(np.mean(np.any(top5 == labels[:, None], axis=1)))
    return Comparison(metrics, details)


def _checked_labels(labels: np.ndarray, classes: int) -> np.ndarray:
    """Integer class indices within the output's classes, or a clear error."""
    import numpy as np

    if not np.issubdtype(labels.dtype, np.integer):
        raise ValueError(f"labels are {labels.dtype}, not integer class indices")
    if len(labels) and (labels.min() < 0 or labels.max() >= classes):
        raise ValueError(f"labels range over {labels.min()}..{labels.max()}, but the output "
                         f"has {classes} classes (0..{classes - 1})")
    return labels
