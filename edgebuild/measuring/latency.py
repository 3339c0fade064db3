"""measure-latency: the documented latency protocol (docs/gates.md).

1. Load the artifact with the profile's thread count; feed one seeded input of each
   shape profile's shapes (edgebuild/core/shapes.py; without `shapes:` one profile,
   the declared example shapes), resizing the artifact between profiles.
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
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from edgebuild.core.generated import sample_inputs
from edgebuild.core.op import OpResult, StageContext
from edgebuild.core.profile import MeasureSettings
from edgebuild.core.shapes import EXAMPLE, io_profiles
from edgebuild.errors import EdgebuildError
from edgebuild.gates import noisy
from edgebuild.measure.conditions import conditions
from edgebuild.measure.record import (
    ComparisonRecord,
    Conditions,
    LatencyFigures,
    LatencyRecord,
    SelectionRecord,
)
from edgebuild.measure.samples import samples_file
from edgebuild.measuring.base import TargetOp

if TYPE_CHECKING:
    import numpy as np

    from edgebuild.backends.base import Backend, Runner


class LatencyParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    memory: bool = Field(False, description="Measure the runtime's peak memory after the "
                         "timed runs (the planner sets it for a `memory:` gate).")
    profile: bool = Field(False, description="Take the per-operator profile (and the "
                          "memory) as `measure.profile` does, whatever the target says "
                          "(`edgebuild profile` sets it).")


class MeasureLatency(TargetOp):
    name = "measure-latency"
    version = 4  # 4: TFLite on-device op profile; TFLite host memory
    Params = LatencyParams
    produces = "latency"
    summary = "time the compiled artifact with the latency protocol"

    def _unmeasurable(self, ctx: StageContext, backend: Backend, params: Any,
                      reason: str) -> OpResult:
        """No latency here, but the per-op profile the backend can take, if asked."""
        assert ctx.target is not None
        if backend.capabilities.profiles_without_latency and (ctx.target.measure.profile
                                                              or params.profile):
            return _profile_only(ctx, backend, reason)
        return super()._unmeasurable(ctx, backend, params, reason)

    def _run(self, ctx: StageContext, backend: Backend, params: Any) -> OpResult:
        assert ctx.target is not None
        settings = ctx.target.measure
        where = backend.where(ctx.target, "latency")
        # `edgebuild profile` (params.profile) asks the device's tool for its profile too.
        on_device = backend.device_latency(ctx.input(), ctx.target, settings.model_copy(
            update={"profile": True}) if params.profile else settings)
        if on_device is not None:
            if ctx.io.shapes:  # a device's own tool times the artifact as it was built
                on_device = LatencyRecord(profiles={profile: LatencyFigures(unmeasurable=(
                    "not measurable here: the device's own benchmark tool times the artifact "
                    "at its built shape only, not at this profile's"))
                    for profile in io_profiles(ctx.io)})
            if on_device.fallback:
                where = f"{where}; {on_device.fallback}"
            on_device.where = where
            return _stored(ctx, on_device)
        profiles = io_profiles(ctx.io)
        asked = settings.profile or params.memory or params.profile
        rows: dict[str, LatencyFigures] = {}
        samples: dict[str, np.ndarray] = {}
        with backend.runner(ctx.input(), ctx.target, settings.threads) as runner:
            where = runner.label(where)
            for profile, shapes in profiles.items():
                rows[profile], timed = _profile(ctx, runner, shapes, settings)
                if timed is not None:
                    samples[profile] = timed
        # A figure timed while others took the CPU is judged by its gate (met, beyond any
        # noise, or not measurable) but never cached: the next run times it again.
        untrusted = "; ".join(reason for reason in (
            noisy.untrusted(row.conditions.as_dict()) for row in rows.values()
            if row.conditions is not None) if reason)
        import numpy as np

        if not ctx.io.shapes:  # one profile, the example shapes: the figures as they always were
            np.save(ctx.out / "samples_ms.npy", samples[EXAMPLE])
            row = rows[EXAMPLE].to_json()
            del row["shapes"]
            record = LatencyRecord.model_validate({**row, "where": where})
        else:
            for profile, timed in samples.items():
                np.save(ctx.out / samples_file(profile), timed)
            record = LatencyRecord(where=where, profiles=rows)
        if asked:  # after the timed runs, their runner closed (measuring/profiling.py)
            from edgebuild.measuring.profiling import add_profile_and_memory

            first = next(iter(profiles.values()))
            (feeds,) = sample_inputs(ctx.io.inputs, seed=0, count=1, shapes=first)
            add_profile_and_memory(record, backend, ctx.input(), ctx.target, feeds, first,
                                   params.memory, params.profile)
        if untrusted:
            record.untrusted = f"not cached: {untrusted}"
        return _stored(ctx, record)


def _profile_only(ctx: StageContext, backend: Backend, reason: str) -> OpResult:
    """No latency (`reason`), but the per-op profile the backend can take here (QNN's on
    the HTP emulator: its own figures, labelled so). Never cached, as "not here" is not:
    a phone may be attached next time."""
    from edgebuild.measure.profiled import MIN_RUNS
    from edgebuild.measuring.profiling import op_profile

    assert ctx.target is not None
    shapes = next(iter(io_profiles(ctx.io).values()))
    (feeds,) = sample_inputs(ctx.io.inputs, seed=0, count=1, shapes=shapes)
    profile = op_profile(backend, ctx.input(), ctx.target, ctx.target.measure.threads,
                         feeds, shapes, MIN_RUNS)
    where = ("no per-op profile either" if profile.unmeasurable else
             f"per-op profile only: {profile.source or backend.name}")
    record = LatencyRecord(unmeasurable=reason, where=where, profile=profile,
                           untrusted=f"not cached: {reason}")
    return _stored(ctx, record)


def _stored(ctx: StageContext, record: LatencyRecord) -> OpResult:
    """The record as latency.json and as the stage's metadata."""
    data = record.to_json()
    (ctx.out / "latency.json").write_text(json.dumps(data, indent=1))
    return OpResult(main="latency.json", format="latency", metadata=data)


def _profile(ctx: StageContext, runner: Runner, shapes: dict[str, list[int]],
             settings: MeasureSettings) -> tuple[LatencyFigures, np.ndarray | None]:
    """One profile's figures and samples; a refused row (`error`) and no samples when the
    artifact cannot run at its shapes. When other processes took the CPU it waits for
    quiet (bounded: measure/quiet.py) and times again, up to MAX_TRIES times; a figure
    still too busy keeps its samples, with `conditions.busy` saying so (the gate decides)."""
    from edgebuild.measure.stats import summarize

    (feeds,) = sample_inputs(ctx.io.inputs, seed=0, count=1, shapes=shapes)
    try:
        runner.reshape(shapes)
        outputs = runner.infer(feeds)  # a converter's baked-in shape fails here, not mid-timing
    except Exception:
        if not ctx.io.shapes:
            raise  # the declared shapes themselves: the stage fails as it always did
        return LatencyFigures.model_validate(refused(shapes)), None
    step = _step(runner, feeds, ctx.io.state)
    before = conditions(settings.threads)
    samples, busy = _timed(step, settings)
    tries, budget = 1, None
    while _too_busy(busy, settings) and tries < MAX_TRIES:
        from edgebuild.measure.quiet import WaitBudget, wait_for_quiet

        assert settings.max_busy_share is not None
        budget = budget or WaitBudget.from_env()
        wait_for_quiet(settings.max_busy_share, budget, ctx.stage_id)
        samples, busy = _timed(step, settings)
        tries += 1
    after = conditions(settings.threads)
    measured = Conditions.model_validate({
        **before, "load_average_after": after["load_average"], "others_busy_share": busy,
        "settings": settings.model_dump()})
    if _too_busy(busy, settings):
        assert busy is not None and settings.max_busy_share is not None
        measured.busy = (
            f"not measurable here: other processes used {busy:.0%} of the CPU while timing, "
            f"{tries} times (limit {settings.max_busy_share:.0%}, measure.max_busy_share); "
            "the figure would time them, not the model. Re-run on a quieter machine")
    # What the artifact produced at this profile: the proof that it ran at its size.
    figures = LatencyFigures.model_validate({
        **summarize(samples), "conditions": measured, "shapes": shapes,
        "output_shapes": shapes_of(outputs),
        # A stream's: one timed run is one step, its state carried.
        **({"per": "step"} if ctx.io.state else {})})
    return figures, samples


def _step(runner: Runner, feeds: dict[str, np.ndarray],
          state: list[dict[str, Any]]) -> Callable[[], object]:
    """One timed run: an inference; for a recurrent model (`state:`) one step, fed the
    state the previous timed step returned (from the declared initial state), as a
    deployed stream runs."""
    if not state:
        return lambda: runner.infer(feeds)
    from edgebuild.data.stream import next_state

    carried = dict(feeds)

    def step() -> object:
        found = runner.infer(carried)
        for pair in state:
            carried[pair["input"]] = next_state(found, pair, carried[pair["input"]])
        return found

    return step


def shapes_of(arrays: dict[str, Any]) -> dict[str, list[int]]:
    return {name: [int(d) for d in value.shape] for name, value in arrays.items()}


MAX_TRIES = 3  # timings of one profile, with a wait for quiet before each retry


def refused(shapes: dict[str, list[int]]) -> dict[str, Any]:
    """The row of a profile the artifact cannot run at: the exception being handled,
    ours (ShapeError names the input) or the runtime's own (its first line)."""
    import sys

    exc = sys.exc_info()[1]
    if isinstance(exc, EdgebuildError):
        return {"shapes": shapes, "error": exc.message, "hint": exc.hint}
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return {"shapes": shapes, "error": f"the artifact fails at shapes {shapes}: {first}",
            "hint": "keep the dimension dynamic in the artifact, or remove this size from "
            "`shapes:` (docs/recipes.md#shape-profiles)"}


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


class InterleavedTiming(TargetOp):
    """Base of the stages that time several artifacts against each other in one process
    (compare-latency, select): the same tools in the key, the same recorded conditions."""

    tools: ClassVar[tuple[str, ...]] = ("numpy",)

    def finish(self, ctx: StageContext, file: str, record: ComparisonRecord | SelectionRecord,
               before: dict[str, Any]) -> OpResult:
        """Write `record` (with the load before and after timing) as the stage's result."""
        record.conditions = Conditions.model_validate(
            {**before, "load_average_after": conditions(None)["load_average"]})
        data = record.to_json()
        (ctx.out / file).write_text(json.dumps(data, indent=1))
        return OpResult(main=file, format=self.produces, metadata=data)
