"""The typed records the measuring stages store, and every reader parses.

    measure-latency ─▶ LatencyRecord     (latency.json, the stage's metadata)
                         one timing's LatencyFigures, or per shape profile in `profiles`
    compare-latency ─▶ ComparisonRecord  (comparison.json): a baseline and this build,
    compare-speed                          interleaved; per profile in `profiles`
    select          ─▶ SelectionRecord   (selection.json): the candidates' standings

A writer builds the model and stores `to_json()` (the fields it set, nothing more, so
the JSON is what the cache has always held); a reader parses the stored metadata with
`read_record`. A record comes from a worker process, a Dask worker, a board or a phone's
benchmark tool, and from the cache: a malformed one is a RecordError naming the field,
never a KeyError deep in a gate.

`profile`, `memory` and `throughput` are the slots for the per-operator profile, the
memory figure and the throughput figure (issue 32): None until a backend measures them.
`profile` is an OpProfile (ONNX Runtime's profiler, OpenVINO's performance counters:
measuring/profiling.py; QNN's profile on the HTP emulator, beside a latency that is "not
measurable here"; Core ML's compute plan, an estimate with no ms; on a device
benchmark_model's or trtexec's per-layer tables, backends/tflite/op_profiling.py and
backends/tensorrt/layer_profile.py); `memory` is
the runtime's peak resident memory (measuring/footprint.py) or benchmark_model's figures.
"""

from __future__ import annotations

from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StrictStr, ValidationError, model_validator

from edgebuild.core.artifact import STAGE_KEYS
from edgebuild.core.stage_result import first_error
from edgebuild.errors import StageError

Shapes = dict[str, list[int]]
Interval = tuple[float | None, float | None]  # a side is None where samples cannot bound it


class Record(BaseModel):
    """A stored record: unknown fields refused, NaN kept as NaN (json.dumps's `NaN`)."""

    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="constants")

    def to_json(self) -> dict[str, Any]:
        """Plain JSON data of the fields that were set (a device tool's None included)."""
        return self.model_dump(mode="json", exclude_unset=True)


class Conditions(Record):
    """What a figure was timed under (measure/conditions.py), read by gates/noisy.py."""

    cpu: StrictStr | None = None
    cores: int | None = None
    threads: int | None = None
    machine: StrictStr | None = None
    system: StrictStr | None = None
    load_average: list[float] | None = None  # 1, 5, 15 minutes, before timing
    load_average_after: list[float] | None = None
    others_busy_share: float | None = None  # of all cores, while timing (CpuMeter)
    settings: dict[str, Any] | None = None  # the MeasureSettings it was timed with
    busy: StrictStr | None = None  # "not measurable here: …" when others took too much

    def as_dict(self) -> dict[str, Any]:
        return self.to_json()


class Memory(Record):
    """The memory a runtime needed, in MB (10^6 bytes): measuring/footprint.py's, measured in
    a fresh process, or TFLite benchmark_model's init and overall figures."""

    peak_mb: float | None = None  # peak resident memory of load + inference
    init_mb: float | None = None  # after loading the model
    overall_mb: float | None = None  # the tool's overall footprint
    # footprint.py: the process before the runtime was imported (Python, numpy, edgebuild),
    # which peak_mb and init_mb leave out, and the process's own high-water mark.
    baseline_mb: float | None = None
    process_peak_mb: float | None = None
    runs: int | None = Field(None, ge=0)  # inferences after the load
    method: StrictStr | None = None  # how it was read (VmHWM after clear_refs, …)
    unmeasurable: StrictStr | None = None  # "not measurable here: …"


class OpRow(Record):
    """One node (ONNX Runtime) or layer (OpenVINO) of a profiled run: mean ms per run.
    Core ML's compute plan gives no time: `ms` None and `share` its estimated cost."""

    node: StrictStr  # the runtime's name for it (untrusted: from the model file)
    op_type: StrictStr
    exec: StrictStr | None = None  # ORT: the execution provider; OpenVINO: jit_avx2_f32, …
    ms: float | None = Field(ge=0)  # None: no time (Core ML's compute plan: an estimate)
    share: float = Field(ge=0)  # of the sum of every row's ms (Core ML: estimated cost)
    onnx_nodes: list[StrictStr] | None = None  # the model's nodes it runs, where known
    fused: bool = False  # one runtime node for several ONNX nodes (a fused group)
    cycles: int | None = Field(None, ge=0)  # QNN: the HTP's cycles for it, per run


class OpProfile(Record):
    """A per-operator profile, taken in a separate run after the timed runs (profiling
    perturbs timing): the runtime's own per-node times, slowest first."""

    source: StrictStr | None = None  # "onnxruntime profiler", "openvino PERF_COUNT"
    runs: int | None = Field(None, ge=0)  # profiled runs the means are over
    wall_ms: float | None = None  # mean wall time of those runs, around the infer call
    runtime_ms: float | None = None  # the runtime's own total per run, where it gives one
    ops_ms: float | None = None  # the sum of the rows (the consistency check's numerator)
    threads: int | None = None
    shapes: Shapes | None = None
    rows: list[OpRow] = Field(default_factory=list)
    note: StrictStr | None = None
    unmeasurable: StrictStr | None = None
    cycles: int | None = Field(None, ge=0)  # QNN: the HTP's own total cycles per run
    estimate: bool = False  # rows carry an estimated cost share, no time (Core ML's plan)

    def by_type(self) -> dict[str, float]:
        """ms per run by op type, slowest first (an estimate's: the summed cost share)."""
        found: dict[str, float] = {}
        for row in self.rows:
            value = row.share if self.estimate else (row.ms or 0.0)
            found[row.op_type] = found.get(row.op_type, 0.0) + value
        return dict(sorted(found.items(), key=lambda item: -item[1]))

    def top(self, count: int = 10) -> list[OpRow]:
        key = (lambda row: -row.share) if self.estimate else (lambda row: -(row.ms or 0.0))
        return sorted(self.rows, key=key)[:count]


class Throughput(Record):
    """Inferences per second with `streams` requests in flight (measuring/throughput.py):
    measure-throughput's record, and the slot of a device tool's own figure."""

    streams: int = Field(ge=1)
    fps: float = Field(ge=0)
    threads_per_stream: int | None = Field(None, ge=1)
    requests: int | None = Field(None, ge=0)  # inferences completed while timed
    window_s: float | None = Field(None, ge=0)  # how long they were timed (seconds)
    p50: float | None = None  # one request's latency (ms) under that load
    p90: float | None = None
    how: StrictStr | None = None  # what ran concurrently: sessions, async requests
    conditions: Conditions | None = None
    where: StrictStr | None = None
    untrusted: StrictStr | None = None  # why it must not be cached (core/artifact.py)
    under_load: StrictStr | None = None  # timed under load and every gate passed: kept


class ServingStep(Record):
    """One model of a served ensemble at one concurrency: the server's own statistics,
    µs per request it executed (Triton's /v2/models/stats, differenced around the run)."""

    model: StrictStr
    requests: int = Field(ge=0)
    queue_us: float = Field(ge=0)
    compute_input_us: float = Field(ge=0)
    compute_infer_us: float = Field(ge=0)
    compute_output_us: float = Field(ge=0)


class ServingLevel(Record):
    """perf_analyzer at one concurrency: throughput, the client's percentiles (ms)."""

    concurrency: int = Field(ge=1)
    fps: float = Field(ge=0)
    requests: int | None = Field(None, ge=0)
    p50: float | None = None
    p90: float | None = None
    p95: float | None = None
    p99: float | None = None
    steps: list[ServingStep] = Field(default_factory=list)


class Serving(Record):
    """A model served by an inference server, measured by its load generator over a
    concurrency sweep (the Triton backend: perf_analyzer)."""

    model: StrictStr  # what was requested: the ensemble, or the model alone
    server: StrictStr | None = None
    command: StrictStr | None = None
    levels: list[ServingLevel] = Field(default_factory=list)


class LatencyFigures(Record):
    """One timing: the latency protocol's statistics (ms), or a device tool's own; or
    why a shape profile has none (`error` and `hint`: the artifact cannot run at its
    shapes; `unmeasurable`: this machine cannot time it)."""

    n: int | None = Field(None, ge=0)
    mean: float | None = None
    std: float | None = None
    min: float | None = None
    max: float | None = None
    p50: float | None = None
    p90: float | None = None
    p99: float | None = None
    p50_ci95: Interval | None = None
    p90_ci95: Interval | None = None
    p99_ci95: Interval | None = None
    conditions: Conditions | None = None
    shapes: Shapes | None = None  # what it was fed (a declared shape profile)
    output_shapes: Shapes | None = None  # what it produced: proof it ran at that size
    per: Literal["step"] | None = None  # a stream's: one timed run is one step
    error: StrictStr | None = None
    hint: StrictStr | None = None
    unmeasurable: StrictStr | None = None
    # Where a device's own tool timed it (TFLite benchmark_model, trtexec):
    source: StrictStr | None = None
    device: dict[str, Any] | None = None  # the phone: serial and what adb says of it
    delegate: StrictStr | None = None
    requested_delegate: StrictStr | None = None
    fallback: StrictStr | None = None  # why it ran on other kernels than asked
    command: StrictStr | None = None
    tool: StrictStr | None = None  # trtexec's command line
    unit: StrictStr | None = None
    first: float | None = None
    p5: float | None = None
    p95: float | None = None
    percentiles: StrictStr | None = None  # what the tool's percentiles are, if any
    init_ms: float | None = None
    first_inference_ms: float | None = None
    warmup_mean_ms: float | None = None
    warmup_n: int | None = None
    runs_note: StrictStr | None = None
    delegation: dict[str, Any] | None = None  # which delegate took which nodes
    model_size_mb: float | None = None
    log_errors: list[StrictStr] | None = None
    # Per-operator times: an OpProfile (a device tool's too: benchmark_model's tables,
    # trtexec's --exportProfile); trtexec's list as written in records cached before.
    profile: OpProfile | list[dict[str, Any]] | None = None
    memory: Memory | None = None
    throughput: Throughput | None = None
    serving: Serving | None = None  # a served model's sweep (backends/triton)

    @model_validator(mode="before")
    @classmethod
    def _earlier_names(cls, data: Any) -> Any:
        """Cache entries written before the record was typed: trtexec's layer times were
        `layers`, benchmark_model's memory `memory_mb` ({init, overall, peak})."""
        if not isinstance(data, dict) or not ({"layers", "memory_mb"} & data.keys()):
            return data
        data = dict(data)
        if "layers" in data and "profile" not in data:
            data["profile"] = data.pop("layers")
        memory = data.pop("memory_mb", None)
        if isinstance(memory, dict) and "memory" not in data:
            data["memory"] = {f"{k}_mb": v for k, v in memory.items()}
        elif memory is not None:
            data["memory_mb"] = memory  # refused below, by name
        return data

    def at(self, percentile: int) -> tuple[float | None, Interval | None]:
        """The figure at a gated percentile (50, 90 or 99) and its 95 % interval; None
        where the tool gives none (benchmark_model prints no p90/p99)."""
        return {50: (self.p50, self.p50_ci95), 90: (self.p90, self.p90_ci95),
                99: (self.p99, self.p99_ci95)}[percentile]

    def figures(self, names: tuple[str, ...]) -> dict[str, float]:
        """The named statistics that were measured (a gate's `measured`)."""
        found = {name: getattr(self, name) for name in names}
        return {name: value for name, value in found.items() if value is not None}

    @property
    def refused(self) -> bool:
        """No figures: the artifact cannot run at these shapes, or nothing could time it."""
        return self.error is not None or self.unmeasurable is not None


class LatencyRecord(LatencyFigures):
    """measure-latency's record: one timing (its figures at the top level, as always),
    or with shape profiles one LatencyFigures per profile in `profiles`."""

    where: StrictStr | None = None  # where the figures come from, when not the target
    profiles: dict[str, LatencyFigures] | None = None
    untrusted: StrictStr | None = None  # why it must not be cached (core/artifact.py)
    under_load: StrictStr | None = None  # timed under load and every gate passed: kept

    def rows(self) -> dict[str, LatencyFigures] | None:
        """The per-profile figures, or None for a single timing (the record itself)."""
        return self.profiles


class PairFigures(Record):
    """Two artifacts timed interleaved at one shape profile: the medians (ms) and the
    number of paired blocks (the samples are in `*_ms<suffix>.npy`); or `error`."""

    blocks: int | None = Field(None, ge=0)
    baseline_p50: float | None = None
    candidate_p50: float | None = None
    baseline_output_shapes: Shapes | None = None
    candidate_output_shapes: Shapes | None = None
    shapes: Shapes | None = None
    error: StrictStr | None = None
    hint: StrictStr | None = None


    def paired(self) -> dict[str, float]:
        """The two medians (`baseline_p50`, `candidate_p50`); RecordError when missing."""
        if self.baseline_p50 is None or self.candidate_p50 is None:
            raise RecordError("a compared pair without its two medians",
                              "its cache entry was changed after it was written (`edgebuild "
                              "cache verify` checks)")
        return {"baseline_p50": self.baseline_p50, "candidate_p50": self.candidate_p50}


class ComparisonRecord(PairFigures):
    """compare-latency's and compare-speed's record."""

    profiles: dict[str, PairFigures] | None = None
    conditions: Conditions | None = None


class Standing(Record):
    """One candidate in a select stage's record."""

    name: StrictStr
    median_ms: float  # with shape profiles: at the first profile
    p90_ms: float
    ratio: float  # its median / the winner's, per paired round; 1.0 for the winner
    ci95: tuple[float, float]
    slower: bool  # the interval lies above 1: a real difference, not noise
    profiles: dict[str, dict[str, float]] | None = None  # median_ms / p90_ms each


class SelectionRecord(Record):
    """select's record: the winner, who ties with it, every standing (fastest first)."""

    chosen: StrictStr
    rounds: int = Field(ge=0)
    tied: list[StrictStr]
    candidates: list[Standing]
    conditions: Conditions | None = None

    def standing(self, name: str) -> Standing | None:
        return next((s for s in self.candidates if s.name == name), None)


RECORDS: dict[str, type[Record]] = {"latency": LatencyRecord,
                                    "latency-comparison": ComparisonRecord,
                                    "selection": SelectionRecord}


class RecordError(StageError):
    """A stored or returned measurement record that is not what its model says."""


R = TypeVar("R", bound=Record)


def read_record(model: type[R], metadata: dict[str, Any], what: str) -> R:
    """A stage's stored metadata (the scheduler's own keys aside) as `model`; `what` names
    where it came from, for the message (a stage id, "the phone's benchmark_model")."""
    try:
        return model.model_validate({k: v for k, v in metadata.items() if k not in STAGE_KEYS})
    except ValidationError as exc:
        raise RecordError(f"{what}: a malformed {model.__name__} ({first_error(exc)})",
                          "its cache entry was changed after it was written (`edgebuild cache "
                          "verify` checks), or a tool printed what edgebuild cannot "
                          "read") from None


def malformed_record(fmt: str, metadata: dict[str, Any]) -> str:
    """'' when a stage's metadata is a valid record of its format (or the format has no
    record model), else the first problem, on one line."""
    model = RECORDS.get(fmt)
    if model is None:
        return ""
    try:
        model.model_validate({k: v for k, v in metadata.items() if k not in STAGE_KEYS})
    except ValidationError as exc:
        return first_error(exc)
    return ""
