"""Report: the single source every output file (JSON, Markdown, JUnit) is rendered from."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from edgebuild.gates.result import GateResult
from edgebuild.measure.record import Memory, OpProfile, Serving
from edgebuild.passes.onnx_metadata import ModelMetadata


class StageReport(BaseModel):
    id: str
    op: str
    target: str | None
    outcome: str  # cached | built | failed | skipped | unmeasurable
    inputs: list[str] = Field(default_factory=list,
                              description="The stages it reads (its edges in the build graph).")
    cached: bool
    seconds: float
    key: str | None = None
    artifact_digest: str | None = None
    message: str = ""
    log: str | None = None
    hint: str = ""
    started: float = Field(0.0, description="Unix time its worker started (0: no worker).")
    finished: float = 0.0
    worker: str = Field("", description="The Dask worker that ran it ('' for this machine).")
    metadata: dict[str, Any] = Field(default_factory=dict)


class CandidateReport(BaseModel):
    """One row of a search's candidate table."""

    name: str
    state: str = Field(description="chosen | passed | rejected | failed | unmeasurable | "
                       "not-tried")
    reason: str = Field("", description="Why it was not chosen (empty when chosen or passed).")
    summary: str = Field("", description="What it adds to the target, in one line.")
    config: dict[str, Any] = Field(default_factory=dict)
    grid: dict[str, Any] = Field(default_factory=dict, description="Its grid values, if any.")
    stage: str = Field("", description="Its compile stage.")
    stages: list[str] = Field(default_factory=list,
                              description="The stages only this candidate needed.")
    p50_ms: float | None = Field(None, description="Its own measure-latency stage.")
    p90_ms: float | None = None
    top1_agreement: float | None = None
    cosine: float | None = None
    top1: float | None = None
    size_mb: float | None = None
    precision: str = Field("", description="Its compiled artifact's precision label "
                           "(TargetReport.precision).")
    interleaved_ms: float | None = Field(
        None, description="Median in the select stage's interleaved comparison.")
    ratio: float | None = Field(None, description="Interleaved median / the chosen one's.")
    ratio_ci95: list[float] | None = None
    pareto: bool = Field(False, description="No other candidate is both faster (p50) and "
                         "at least as faithful (agreement), or as fast and more faithful.")
    chosen: bool = False
    gates: list[GateResult] = Field(default_factory=list)


class SearchReport(BaseModel):
    chosen: str | None
    message: str
    max_candidates: int
    max_minutes: float | None
    seconds: float = Field(description="Time the search spent on its candidates.")
    candidates: list[CandidateReport]
    selection: dict[str, Any] | None = Field(
        None, description="The select stage's result: rounds, ties, conditions.")


class TargetReport(BaseModel):
    name: str
    profile: str
    backend: str
    artifact: str | None = Field(None, description="Final artifact, relative to the out dir.")
    format: str | None = Field(None, description="The artifact's format (onnx, openvino-ir, …).")
    size_bytes: int | None = None
    gates: list[GateResult] = Field(default_factory=list)
    search: SearchReport | None = None
    notes: dict[str, str] = Field(
        default_factory=dict, description="Markdown a backend wrote for reviewers, by file "
        "(e.g. the TFLite NNAPI coverage table).")
    precision: str = Field(
        "", description="The precision the artifact really runs in, as its compile stage "
        "read it back (OpenVINO: the compiled model's INFERENCE_PRECISION_HINT and layer "
        "precisions, saying when a requested bf16/f16 ran as f32); '' when the backend "
        "does not establish one.")
    model: ModelMetadata | None = Field(
        None, description="The model's own metadata (an ONNX source's `metadata_props`: "
        "task, class names, stride, input size), as edgebuild read it.")
    op_profile: OpProfile | None = Field(
        None, description="The per-operator profile measure-latency took after its timed "
        "runs (`measure.profile: true`; docs/profiles.md).")
    memory: Memory | None = Field(
        None, description="The runtime's peak memory for load + inference (with "
        "`measure.profile` or a `memory:` gate).")
    serving: Serving | None = Field(
        None, description="A served model's load sweep and, per composing model, the "
        "server's queue and compute times (the Triton backend: perf_analyzer).")
    speedup_over: str | None = Field(
        None, description="The target its `speedup:` gate compares with (the per-op "
        "comparison pairs them: docs/profiles.md).")

    @property
    def passed(self) -> bool:
        return all(self.gates)


class Report(BaseModel):
    recipe: str
    recipe_file: str
    edgebuild_version: str
    started: str
    seconds: float
    exit_code: int
    stages: list[StageReport]
    targets: list[TargetReport]
    counts: dict[str, int] = Field(description="Stages by outcome.")
    machine: dict[str, Any] = Field(default_factory=dict)

    @property
    def gates(self) -> list[GateResult]:
        return [g for t in self.targets for g in t.gates]
