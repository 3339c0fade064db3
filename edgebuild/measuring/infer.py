"""Accuracy: run the compiled artifact on a dataset; its outputs are judged later.

The `infer` stage stores outputs; the metrics (fidelity/compare.py) and the verdict
(fidelity/verdict.py) are computed when gates are evaluated, so changing a limit in
the recipe re-evaluates without re-running.
"""

from __future__ import annotations

from typing import Any

from edgebuild.core.op import Op, OpResult, StageContext
from edgebuild.core.target import Target
from edgebuild.fidelity.outputs import save_outputs
from edgebuild.measuring.reference import DatasetParams
from edgebuild.registry import backend_tools, load_backend


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
