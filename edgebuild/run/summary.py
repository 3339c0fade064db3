"""The run's one-line account of its stages: what ran, what was cached, what could not.

A fully cached re-run of a recipe with phone, Mac or Jetson targets still asks
whether those devices are attached (never cached), but the driver answers that
itself (execute/remote/probe.py), so such a run executed nothing and says so::

    0 stages executed: nothing to build; 34 of 41 cached, 7 not measurable here:
    no phone, Mac or Jetson Orin Nano 8GB attached (asked again every run)

A stage "executed" when a worker ran it (report.json `started` > 0): a stage the
probe answered, or one unmeasurable because an upstream stage was, never started one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from edgebuild.core.profile import RunnerKind

if TYPE_CHECKING:
    from edgebuild.recipe.loader import LoadedRecipe
    from edgebuild.report.model import Report


def executed_count(report: Report) -> int:
    """How many stages a worker ran (built, failed, or tried and could not measure)."""
    counts = report.counts
    tried = sum(1 for s in report.stages if s.outcome == "unmeasurable" and s.started > 0)
    return counts.get("built", 0) + counts.get("failed", 0) + tried


def stage_summary(report: Report, loaded: LoadedRecipe) -> str:
    """The summary line, without the run's seconds."""
    counts = report.counts
    built, cached = counts.get("built", 0), counts.get("cached", 0)
    skipped = counts.get("skipped", 0)
    unmeasurable = [s for s in report.stages if s.outcome == "unmeasurable"]
    executed = executed_count(report)
    if executed or skipped:  # a failed stage ran too: never "nothing to build" then
        return (f"{executed} stage(s) executed ({built} built), {cached} cached"
                + (f", {skipped} skipped" if skipped else "")
                + (f", {len(unmeasurable)} not measurable here" if unmeasurable else ""))
    if not unmeasurable:
        return f"0 stages executed: all {cached} cached, nothing to build"
    # A target whose compile could not run here lacks a backend (Backend.compile_probe:
    # litert-torch not installed), not a device: say which, apart from the devices.
    unbuildable = {s.target for s in unmeasurable if s.target and s.id.startswith("compile@")}
    absent = _absent_devices(loaded, {s.target for s in unmeasurable
                                      if s.target and s.target not in unbuildable})
    missing = sorted({loaded.targets[t].backend for t in unbuildable if t in loaded.targets})
    reasons = ([f"no {_either(absent)} attached"] if absent else []) + (
        [f"backend {_either(missing)} not installed"] if missing else [])
    why = f": {'; '.join(reasons)}" if reasons else ""
    return (f"0 stages executed: nothing to build; {cached} of {len(report.stages)} cached, "
            f"{len(unmeasurable)} not measurable here{why} (asked again every run)")


def _absent_devices(loaded: LoadedRecipe, targets: set[str]) -> list[str]:
    """What a user would plug in for these targets, once each, in recipe order."""
    names: list[str] = []
    for name, target in loaded.targets.items():
        if name not in targets:
            continue
        runs_on = target.runs_on
        noun = {RunnerKind.ADB: "phone", RunnerKind.MACOS: "Mac",
                RunnerKind.SSH: f"ssh host {runs_on.host}",
                RunnerKind.EMULATED: f"real {target.profile.device.name}"}.get(
            runs_on.kind, target.profile.device.name)
        if runs_on.kind is not RunnerKind.HOST and noun not in names:
            names.append(noun)
    return names


def _either(names: list[str]) -> str:
    """"a", "a or b", "a, b or c"."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"
