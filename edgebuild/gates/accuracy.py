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
            outputs = [runner.infer(samples.feed(i)) for i in range(len(samples))]
        save_outputs(ctx.out / "outputs.npz", outputs, samples)
        return OpResult(main="outputs.npz", format="outputs",
                        metadata={"samples": len(samples), "dataset": params.dataset,
                                  "where": backend.where(ctx.target, "accuracy")})


def _first_output(path: Path) -> tuple[np.ndarray, np.ndarray | None]:
    import numpy as np

    with np.load(path) as archive:
        key = next(k for k in archive.files if k.startswith("output:"))
        labels = archive["labels"] if "labels" in archive.files else None
        return archive[key].reshape(len(archive[key]), -1).astype(np.float64), labels


def accuracy_metrics(candidate: Path, reference: Path) -> dict[str, float]:
    """Every metric the gate can check, from two stored output files."""
    import numpy as np

    got, labels = _first_output(candidate)
    ref, _ = _first_output(reference)
    if got.shape != ref.shape:
        raise ValueError(f"output shape {got.shape} differs from the reference {ref.shape}")
    metrics: dict[str, float] = {"samples": float(len(got))}
    top1 = got.argmax(axis=1)
    ref_top1 = ref.argmax(axis=1)
    metrics["top1_agreement"] = 100.0 * float(np.mean(top1 == ref_top1))
    got_norm, ref_norm = np.linalg.norm(got, axis=1), np.linalg.norm(ref, axis=1)
    norms = got_norm * ref_norm
    cosine = np.sum(got * ref, axis=1) / np.where(norms == 0, 1, norms)
    # Two all-zero outputs are identical; one zero output against a non-zero one is not.
    cosine = np.where((got_norm == 0) & (ref_norm == 0), 1.0, cosine)
    metrics["cosine"] = float(np.mean(cosine))
    metrics["max_abs_error"] = float(np.max(np.abs(got - ref)))
    if labels is not None:
        metrics["top1"] = 100.0 * float(np.mean(top1 == labels))
        metrics["reference_top1"] = 100.0 * float(np.mean(ref_top1 == labels))
        metrics["top1_drop"] = metrics["reference_top1"] - metrics["top1"]
        k = min(5, got.shape[1])
        top5 = np.argpartition(-got, k - 1, axis=1)[:, :k]
        metrics["top5"] = 100.0 * float(np.mean(np.any(top5 == labels[:, None], axis=1)))
    return metrics
