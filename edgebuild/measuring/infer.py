"""Accuracy: run the compiled artifact on a dataset; its outputs are judged later.

The `infer` stage stores outputs; the metrics (fidelity/compare.py) and the verdict
(fidelity/verdict.py) are computed when gates are evaluated, so changing a limit in
the recipe re-evaluates without re-running.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from edgebuild.core.op import OpResult, StageContext
from edgebuild.core.profile import RunnerKind
from edgebuild.fidelity.outputs import save_outputs
from edgebuild.measuring.base import TargetOp
from edgebuild.measuring.reference import DatasetParams

if TYPE_CHECKING:
    from edgebuild.backends.base import Backend


class Infer(TargetOp):
    name = "infer"
    version = 3
    Params = DatasetParams
    produces = "outputs"
    tools: ClassVar[tuple[str, ...]] = ("numpy", "pillow")
    probes = "accuracy"
    summary = "run the compiled artifact on an evaluation dataset"

    def _run(self, ctx: StageContext, backend: Backend, params: Any) -> OpResult:
        assert ctx.target is not None
        from edgebuild.data.stream import evaluate, first_feeds, stream_summary

        samples = ctx.dataset(params.dataset)
        threads = ctx.target.measure.threads
        with backend.runner(ctx.input(), ctx.target, threads) as runner:
            where = runner.label(backend.where(ctx.target, "accuracy"))
            if ctx.target.runs_on.kind is RunnerKind.EMULATED:
                where = _emulated(ctx.target.runs_on.cpu, where)
            if len(samples):  # a dataset at another size than the example: resize first
                runner.reshape({n: list(a.shape) for n, a in first_feeds(samples).items()})
            # one call per sample, or per step of a stream with this build's own state
            outputs = evaluate(samples, ctx.io.state, runner.infer)
        save_outputs(ctx.out / "outputs.npz", outputs, samples,
                     {p["output"] for p in ctx.io.state})
        return OpResult(main="outputs.npz", format="outputs",
                        metadata={**stream_summary(samples, outputs),
                                  "dataset": params.dataset, "where": where})


def _emulated(cpu: str | None, where: str) -> str:
    """Which aarch64 kernels an emulated board's outputs come from: the CPU features the
    runtime read (core/arm_features.py), beside what the backend says."""
    from edgebuild.core.arm_features import kernel_features

    said = (f"emulated aarch64, qemu-user -cpu {cpu or 'max'}: the runtime's aarch64 kernels "
            f"for the CPU features {kernel_features()}")
    return f"{said}; {where}" if where else said
