"""compare-latency: the baseline's artifact and this build's, timed interleaved.

Planned only for `edgebuild run --baseline REPORT` (the baseline arrives as the `baseline`
input, measuring/import_baseline.py) and the speed-up gate; see gates/regression.py for why
both must be measured in the same process. With shape profiles, each profile is
timed as its own pair (the regression gate decides per profile).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from edgebuild.core.generated import sample_inputs
from edgebuild.core.op import OpResult, StageContext
from edgebuild.core.shapes import EXAMPLE, io_profiles
from edgebuild.measure.conditions import conditions
from edgebuild.measure.record import ComparisonRecord, PairFigures
from edgebuild.measuring.latency import InterleavedTiming, refused, shapes_of

if TYPE_CHECKING:
    from edgebuild.backends.base import Backend


class CompareLatency(InterleavedTiming):
    """`run --baseline`'s measurement: the baseline build (the `baseline` input, imported
    from its manifest by `import-baseline`) against this one."""

    name = "compare-latency"
    version = 2  # 2: the baseline is an input artifact (from its manifest), not a path
    produces = "latency-comparison"
    summary = "time the baseline artifact and this one, interleaved"

    def _run(self, ctx: StageContext, backend: Backend, params: Any) -> OpResult:
        """Time the `baseline` input and this stage's model in pairs of blocks, per shape
        profile."""
        import numpy as np

        from edgebuild.measure.timing import time_pair

        assert ctx.target is not None
        baseline = ctx.input("baseline")
        settings = ctx.target.measure
        before = conditions(settings.threads)
        rows: dict[str, PairFigures] = {}
        with backend.runner(baseline, ctx.target, settings.threads) as base_runner, \
                backend.runner(ctx.input(), ctx.target, settings.threads) as head_runner:
            for profile, shapes in io_profiles(ctx.io).items():
                # Either build may have folded a declared constant the other still takes.
                (every,) = sample_inputs([*ctx.io.inputs, *ctx.io.folded], seed=0, count=1,
                                         shapes=shapes)
                constants = {t["name"] for t in [*ctx.io.inputs, *ctx.io.folded]
                             if t.get("value") is not None}
                produced = []
                try:
                    for runner in (base_runner, head_runner):
                        runner.reshape(shapes)
                        produced.append(shapes_of(runner.infer(runner.fed(every, constants))))
                except Exception:
                    if not ctx.io.shapes:
                        raise
                    rows[profile] = PairFigures.model_validate(refused(shapes))
                    continue
                base_feeds = base_runner.fed(every, constants)
                head_feeds = head_runner.fed(every, constants)
                base, head = time_pair(lambda: base_runner.infer(base_feeds),  # noqa: B023
                                       lambda: head_runner.infer(head_feeds),  # noqa: B023
                                       settings)
                suffix = f"-{profile}" if ctx.io.shapes else ""
                np.save(ctx.out / f"baseline_ms{suffix}.npy", base)
                np.save(ctx.out / f"candidate_ms{suffix}.npy", head)
                rows[profile] = PairFigures(blocks=len(base), baseline_p50=float(np.median(base)),
                                            candidate_p50=float(np.median(head)),
                                            baseline_output_shapes=produced[0],
                                            candidate_output_shapes=produced[1])
        record = (ComparisonRecord(profiles=rows) if ctx.io.shapes
                  else ComparisonRecord.model_validate(rows[EXAMPLE].to_json()))
        return self.finish(ctx, "comparison.json", record, before)


class OverParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    over: str  # the target whose build is the baseline (its artifact is the `baseline` input)


class CompareTargets(CompareLatency):
    """The speed-up gate's measurement: another target's build (the `baseline` input,
    e.g. the FP32 model) against this one, in the same process, interleaved."""

    name = "compare-speed"
    version = 1
    Params = OverParams
    summary = "time another target's build and this one, interleaved (speed-up gate)"
