"""What measure-latency adds after its timed runs when a target asks (issue 32).

    timed runs (the runner) ─ closed ─▶ per-op profile (a session of its own, profiling on)
                                     ─▶ memory (a fresh process: measuring/footprint.py)

Both run after the timed runs and outside them (a profiler's bookkeeping and a second
session would perturb the timing), and only when asked: `measure.profile: true` takes
both; a `memory:` gate takes the memory alone. A target that asks for neither runs none
of this. They are taken at the target's first shape profile (its build shape).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from edgebuild.measure.profiled import profiled_runs
from edgebuild.measure.record import LatencyRecord, OpProfile

if TYPE_CHECKING:
    import numpy as np

    from edgebuild.backends.base import Backend
    from edgebuild.core.artifact import Artifact
    from edgebuild.core.target import Target


def add_profile_and_memory(record: LatencyRecord, backend: Backend, artifact: Artifact,
                           target: Target, feeds: dict[str, np.ndarray],
                           shapes: dict[str, list[int]], memory: bool,
                           profile: bool = False) -> None:
    """Fill `record.profile` (with `measure.profile`, or `profile`: `edgebuild profile`)
    and `record.memory` (with either, or a memory gate: `memory`), in that order, after
    the timed runs."""
    from edgebuild.measuring.footprint import measure_memory

    threads = target.measure.threads
    profile = profile or target.measure.profile
    if profile:
        rows = record.profiles
        first = next(iter(rows.values())) if rows else record
        record.profile = op_profile(backend, artifact, target, threads, feeds, shapes,
                                    profiled_runs(first.p50))
    if memory or profile:
        record.memory = measure_memory(artifact, target, threads, feeds, shapes)


def op_profile(backend: Backend, artifact: Artifact, target: Target, threads: int | None,
               feeds: dict[str, np.ndarray], shapes: dict[str, list[int]],
               runs: int) -> OpProfile:
    """The backend's profile, or one saying why there is none. A profiler that fails
    does not fail the latency it follows: the record says what it raised."""
    try:
        found = backend.op_profile(artifact, target, threads, feeds, shapes, runs)
    except Exception as exc:  # a vendor profiler's failure, reported in the record
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return OpProfile(unmeasurable=f"not measured: the {backend.name} profiler failed: "
                         f"{first[:300]}")
    if found is None:
        return OpProfile(unmeasurable=f"not measurable here: backend {backend.name} has no "
                         "per-operator profiler edgebuild reads on this host")
    found.shapes = shapes
    return found


def consistency(profile: OpProfile) -> float | None:
    """The sum of the op times over the profiled run's own wall time (≤ 1 plus timer
    granularity: the ops run inside the run; below 1 by the runtime's overhead between
    ops and the Python call around it). None without both figures."""
    if not profile.ops_ms or not profile.wall_ms:
        return None
    return profile.ops_ms / profile.wall_ms
