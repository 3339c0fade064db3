"""measure-latency: the documented latency protocol (docs/gates.md).

1. Load the artifact with the profile's thread count; feed one seeded input.
2. Warm up for `warmup_iterations` runs (caches, allocator, JIT paths), discarded.
3. Time single runs with perf_counter_ns until *both* `min_iterations` runs and
   `min_seconds` have passed (or `max_iterations`): edgebuild/measure/timing.py,
   the same loop the regression gate and a search's select use.
4. Report p50/p90/p99, mean, std and 95 % intervals, with the conditions
   (threads, CPU model, load average before and after) the numbers came from.

The executor holds the device lock while this runs, so no other stage of the
same run competes for the cores.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any, ClassVar

from edgebuild.core.op import Op, OpResult, StageContext
from edgebuild.core.profile import MeasureSettings
from edgebuild.core.target import Target
from edgebuild.measure.conditions import conditions
from edgebuild.passes.torch_model import sample_inputs
from edgebuild.registry import backend_tools, load_backend

if TYPE_CHECKING:
    import numpy as np


class MeasureLatency(Op):
    name = "measure-latency"
    version = 3
    accepts = ("*",)
    produces = "latency"
    target_specific = True
    summary = "time the compiled artifact with the latency protocol"

    def tool_names(self, target: Target | None) -> tuple[str, ...]:
        assert target is not None
        return backend_tools(target.backend)

    def run(self, ctx: StageContext, params: Any) -> OpResult:
        assert ctx.target is not None
        backend = load_backend(ctx.target.backend)
        reason = backend.unmeasurable_reason(ctx.target)
        if reason:
            return OpResult(main="", format="latency", unmeasurable=reason)
        import numpy as np

        from edgebuild.measure.stats import summarize

        settings = ctx.target.measure
        where = backend.where(ctx.target, "latency")
        on_device = backend.device_latency(ctx.input(), ctx.target, settings)
        if on_device is not None:
            (ctx.out / "latency.json").write_text(json.dumps(on_device, indent=1))
            if on_device.get("fallback"):
                where = f"{where}; {on_device['fallback']}"
            return OpResult(main="latency.json", format="latency",
                            metadata={**on_device, "where": where})
        (feeds,) = sample_inputs(ctx.io.inputs, seed=0, count=1)
        before = conditions(settings.threads)
        with backend.runner(ctx.input(), ctx.target, settings.threads) as runner:
            where = runner.label(where)
            samples, busy = _timed(lambda: runner.infer(feeds), settings)
            if _too_busy(busy, settings):
                time.sleep(RETRY_PAUSE_S)  # one more try once the other work may be done
                samples, busy = _timed(lambda: runner.infer(feeds), settings)
        after = conditions(settings.threads)
        if _too_busy(busy, settings):
            assert busy is not None
            return OpResult(main="", format="latency", unmeasurable=(
                f"not measurable here: other processes used {busy:.0%} of the CPU while "
                f"timing, twice (limit {settings.max_busy_share:.0%}, measure.max_busy_share); "
                "the figure would time them, not the model. Re-run on a quieter machine"))
        np.save(ctx.out / "samples_ms.npy", samples)
        summary = summarize(samples)
        summary["conditions"] = {**before, "load_average_after": after["load_average"],
                                 "others_busy_share": busy,
                                 "settings": settings.model_dump()}
        summary["where"] = where
        (ctx.out / "latency.json").write_text(json.dumps(summary, indent=1))
        return OpResult(main="latency.json", format="latency", metadata=summary)


RETRY_PAUSE_S = 5.0


def _timed(run: Any, settings: MeasureSettings) -> tuple[np.ndarray, float | None]:
    """The samples, and the share of the CPU other processes took meanwhile."""
    from edgebuild.measure.conditions import CpuMeter
    from edgebuild.measure.timing import time_one

    meter = CpuMeter.start()
    samples = time_one(run, settings)
    return samples, meter.others_share() if meter is not None else None


def _too_busy(busy: float | None, settings: MeasureSettings) -> bool:
    limit = settings.max_busy_share
    return limit is not None and busy is not None and busy > limit


class InterleavedTiming(Op):
    """Base of the stages that time several artifacts against each other in one process
    (compare-latency, select): the same tools in the key, the same recorded conditions."""

    accepts = ("*",)
    target_specific = True
    tools: ClassVar[tuple[str, ...]] = ("numpy",)

    def tool_names(self, target: Target | None) -> tuple[str, ...]:
        assert target is not None
        return (*backend_tools(target.backend), "numpy")

    def finish(self, ctx: StageContext, file: str, summary: dict[str, Any],
               before: dict[str, Any]) -> OpResult:
        """Write `summary` (with the load before and after timing) as the stage's result."""
        summary = {**summary, "conditions": {
            **before, "load_average_after": conditions(None)["load_average"]}}
        (ctx.out / file).write_text(json.dumps(summary, indent=1))
        return OpResult(main=file, format=self.produces, metadata=summary)
