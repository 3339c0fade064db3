"""How many runs a per-operator profile takes, and the profile and memory a
measure-latency stage stored (measuring/profiling.py takes them; a device's own
profiler, backends/tflite/device.py, runs as many; the report reads them back)."""

from __future__ import annotations

from edgebuild.measure.record import LatencyRecord, Memory, OpProfile, Serving

MIN_RUNS, MAX_RUNS = 5, 50  # profiled runs: about PROFILE_MS of inference, within these
PROFILE_MS = 1000.0


def profiled_runs(p50_ms: float | None) -> int:
    """How many runs to profile: about a second of them, 5 to 50."""
    if not p50_ms or p50_ms <= 0:
        return MIN_RUNS
    return max(MIN_RUNS, min(MAX_RUNS, round(PROFILE_MS / p50_ms)))


def recorded(metadata: dict[str, object] | None) -> tuple[OpProfile | None, Memory | None]:
    """The profile and memory a measure-latency stage stored (the report shows them);
    (None, None) when it has none, or a record this edgebuild cannot read."""
    from edgebuild.measure.record import RecordError, read_record

    if not metadata:
        return None, None
    try:
        record = read_record(LatencyRecord, dict(metadata), "measure-latency")
    except RecordError:
        return None, None
    profile = record.profile if isinstance(record.profile, OpProfile) else None
    return profile, record.memory


def served(metadata: dict[str, object] | None) -> Serving | None:
    """A served model's sweep and per-model breakdown a measure-latency stage stored
    (backends/triton), for the report; None without one or for an unreadable record."""
    from edgebuild.measure.record import RecordError, read_record

    if not metadata:
        return None
    try:
        return read_record(LatencyRecord, dict(metadata), "measure-latency").serving
    except RecordError:
        return None
