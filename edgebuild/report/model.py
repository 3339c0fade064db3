"""Report: the single source every output file (JSON, Markdown, JUnit) is rendered from."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from edgebuild.gates.result import GateResult


class StageReport(BaseModel):
    id: str
    op: str
    target: str | None
    outcome: str  # cached | built | failed | skipped | unmeasurable
    cached: bool
    seconds: float
    key: str | None = None
    artifact_digest: str | None = None
    message: str = ""
    log: str | None = None
    hint: str = ""
    started: float = Field(0.0, description="Unix time its worker started (0: no worker).")
    finished: float = 0.0
    metadata: dict[str, Any] = Field(default_factory=dict)


class TargetReport(BaseModel):
    name: str
    profile: str
    backend: str
    artifact: str | None = Field(None, description="Final artifact, relative to the out dir.")
    format: str | None = Field(None, description="The artifact's format (onnx, openvino-ir, …).")
    size_bytes: int | None = None
    gates: list[GateResult] = Field(default_factory=list)

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
