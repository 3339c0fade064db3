"""Small schema pieces shared by recipes and target profiles."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field


class Strict(BaseModel):
    """Base for every schema model: unknown keys are errors, values are frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class PackageFile(Strict):
    """A file shipped inside an installed Python distribution, e.g. pretrained weights."""

    package: str = Field(description="Importable top-level package name, e.g. `skimage`.")
    path: str = Field(description="Path inside that package's folder.")


FileRef = Annotated[
    str | PackageFile,
    Field(description="A path relative to the recipe file, or `{package, path}`."),
]


class MeasureSettings(Strict):
    """The latency measurement protocol (docs/gates.md explains each step)."""

    warmup_iterations: int = Field(10, ge=0, description="Runs discarded before timing.")
    min_iterations: int = Field(100, ge=5, description="Timed runs, at least.")
    min_seconds: float = Field(2.0, ge=0, description="Timed seconds, at least.")
    max_iterations: int = Field(100_000, ge=5, description="Stop after this many timed runs.")
    threads: int | None = Field(
        None, ge=1, description="Inference threads; default: the backend's own choice."
    )


class MeasureOverrides(Strict):
    """Per-recipe changes to a profile's measurement settings."""

    warmup_iterations: int | None = Field(None, ge=0)
    min_iterations: int | None = Field(None, ge=5)
    min_seconds: float | None = Field(None, ge=0)
    max_iterations: int | None = Field(None, ge=5)
    threads: int | None = Field(None, ge=1)

    def apply(self, base: MeasureSettings) -> MeasureSettings:
        changes = {k: v for k, v in self.model_dump().items() if v is not None}
        return base.model_copy(update=changes)


class Precision(StrEnum):
    FP32 = "fp32"
    FP16 = "fp16"
    BF16 = "bf16"
    INT8 = "int8"


JsonDict = dict[str, Any]
