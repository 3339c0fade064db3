"""Accuracy: run the compiled artifact on a dataset, then compare with labels / FP32.

The `infer` stage stores outputs; the metrics are computed when gates are
evaluated, so changing a limit in the recipe re-evaluates without re-running.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgebuild.core.op import Op, OpResult, StageContext
from edgebuild.core.target import Target
from edgebuild.gates.reference import DatasetParams, save_outputs
from edgebuild.registry import backend_tools, load_backend

if TYPE_CHECKING:
    import numpy as np


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
        samples = ctx.dataset(params.dataset)
        threads = ctx.target.measure.threads
        with backend.runner(ctx.input(), ctx.target, threads) as runner:
            where = runner.label(backend.where(ctx.target, "accuracy"))
            if len(samples):  # a dataset at another size than the example: resize first
                runner.reshape({n: list(a.shape) for n, a in samples.feed(0).items()})
            outputs = [runner.infer(samples.feed(i)) for i in range(len(samples))]
        save_outputs(ctx.out / "outputs.npz", outputs, samples)
        return OpResult(main="outputs.npz", format="outputs",
                        metadata={"samples": len(samples), "dataset": params.dataset,
                                  "where": where})


def _output(path: Path, output: str | None) -> tuple[np.ndarray, np.ndarray | None]:
    """One output of a stored outputs file, as (samples × values), and the labels."""
    import numpy as np

    with np.load(path) as archive:
        stored = [k.removeprefix("output:") for k in archive.files if k.startswith("output:")]
        name = output if output is not None else stored[0]
        if name not in stored:
            raise ValueError(f"the model produced no output '{name}' (it has {stored})")
        values = archive[f"output:{name}"]
        labels = archive["labels"] if "labels" in archive.files else None
        return values.reshape(len(values), -1).astype(np.float64), labels


# Float32 outputs of order 1 carry noise near 1e-6; a sample whose values all stay below
# this (or 1e-3 of the dataset's largest value) is numerically zero: a blank heat map.
NEAR_ZERO_ABS = 1e-5
NEAR_ZERO_REL = 1e-3
PSNR_CAP_DB = 999.0  # identical outputs: the PSNR is infinite, JSON has no infinity


def accuracy_metrics(candidate: Path, reference: Path, output: str | None = None,
                     task: str = "classification") -> dict[str, float]:
    """Every metric the gate can check on one output, from two stored output files.

    Comparisons with FP32 are per sample, so one sample cannot hide another's error;
    class metrics (top-k, agreement) only for a classification output, where an
    argmax means something.
    """
    import numpy as np

    got, labels = _output(candidate, output)
    ref, _ = _output(reference, output)
    if got.shape != ref.shape:
        raise ValueError(f"output shape {got.shape} differs from the reference {ref.shape}")
    metrics: dict[str, float] = {"samples": float(len(got))}
    diff = got - ref
    metrics["max_abs_error"] = float(np.max(np.abs(diff)))
    scale = float(np.max(np.abs(ref))) if ref.size else 0.0
    zero = max(NEAR_ZERO_ABS, NEAR_ZERO_REL * scale)
    near_zero = (np.max(np.abs(ref), axis=1) <= zero) & (np.max(np.abs(got), axis=1) <= zero)
    got_norm, ref_norm = np.linalg.norm(got, axis=1), np.linalg.norm(ref, axis=1)
    norms = got_norm * ref_norm
    cosine = np.sum(got * ref, axis=1) / np.where(norms == 0, 1, norms)
    # Two numerically-zero outputs agree; their direction is noise, not a result.
    cosine = np.where(near_zero, 1.0, cosine)
    metrics["cosine"] = float(np.mean(cosine))
    metrics["near_zero_samples"] = float(np.sum(near_zero))
    floor = max(NEAR_ZERO_REL * float(np.max(ref_norm)) if len(ref) else 0.0, 1e-12)
    relative = np.linalg.norm(diff, axis=1) / np.maximum(ref_norm, floor)
    metrics["relative_error"] = float(np.mean(relative))
    mse = float(np.mean(diff ** 2))
    peak = float(np.max(ref) - np.min(ref)) if ref.size else 0.0
    metrics["psnr"] = (PSNR_CAP_DB if mse == 0 or peak == 0
                       else min(PSNR_CAP_DB, 10 * float(np.log10(peak ** 2 / mse))))
    if task != "classification":
        return metrics
    top1 = got.argmax(axis=1)
    ref_top1 = ref.argmax(axis=1)
    metrics["classes"] = float(got.shape[1])
    metrics["top1_agreement"] = 100.0 * float(np.mean(top1 == ref_top1))
    if labels is not None:
        labels = _checked_labels(labels, got.shape[1])
        metrics["top1"] = 100.0 * float(np.mean(top1 == labels))
        metrics["reference_top1"] = 100.0 * float(np.mean(ref_top1 == labels))
        metrics["top1_drop"] = metrics["reference_top1"] - metrics["top1"]
        if got.shape[1] > 5:  # with 5 classes or fewer, top-5 is 100 % whatever the model
            top5 = np.argpartition(-got, 4, axis=1)[:, :5]
            metrics["top5"] = 100.0 * float(np.mean(np.any(top5 == labels[:, None], axis=1)))
    return metrics


def _checked_labels(labels: np.ndarray, classes: int) -> np.ndarray:
    """Integer class indices within the output's classes, or a clear error."""
    import numpy as np

    if not np.issubdtype(labels.dtype, np.integer):
        raise ValueError(f"labels are {labels.dtype}, not integer class indices")
    if len(labels) and (labels.min() < 0 or labels.max() >= classes):
        raise ValueError(f"labels range over {labels.min()}..{labels.max()}, but the output "
                         f"has {classes} classes (0..{classes - 1})")
    return labels
