"""The ONNX Runtime backend's options (a target profile's `options:`).

Below the rest of backends/onnxruntime/: backend.py declares `Backend[OrtOptions]`;
runner.py turns them into ONNX Runtime's session options, which profile.py uses too.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field


class GraphLevel(StrEnum):
    DISABLE = "disable"
    BASIC = "basic"
    EXTENDED = "extended"
    ALL = "all"


class OrtOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    graph_optimization_level: GraphLevel = Field(
        GraphLevel.EXTENDED, description="Offline optimization level saved into the artifact."
    )
    intra_op_threads: int | None = Field(
        None, ge=1, description="Threads inside an operator; default: ONNX Runtime's choice."
    )
    execution_providers: list[str] = Field(
        default_factory=lambda: ["CPUExecutionProvider"], min_length=1,
        description="Execution providers, in priority order.",
    )
