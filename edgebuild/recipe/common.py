"""Small schema pieces shared by recipes and target profiles."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from edgebuild.core.profile import MeasureSettings, Precision, Strict

__all__ = ["FileRef", "JsonDict", "MeasureOverrides", "MeasureSettings", "PackageFile",
           "Precision", "Strict"]


class PackageFile(Strict):
    """A file shipped inside an installed Python distribution, e.g. pretrained weights."""

    package: str = Field(description="Importable top-level package name, e.g. `skimage`.")
    path: str = Field(description="Path inside that package's folder.")


FileRef = Annotated[
    str | PackageFile,
    Field(description="A path relative to the recipe file, or `{package, path}`."),
]


class MeasureOverrides(Strict):
    """Per-recipe changes to a profile's measurement settings."""

    warmup_iterations: int | None = Field(None, ge=0)
    min_iterations: int | None = Field(None, ge=5)
    min_seconds: float | None = Field(None, ge=0)
    max_iterations: int | None = Field(None, ge=5)
    threads: int | None = Field(None, ge=1, le=1024)
    max_busy_share: float | None = Field(None, gt=0, le=1)
    profile: bool | None = Field(None, description="true: a per-operator profile and the "
                                  "peak memory after the timed runs (docs/profiles.md).")

    def apply(self, base: MeasureSettings) -> MeasureSettings:
        # What the recipe wrote, `null` included (`max_busy_share: null` turns the check
        # off); a key it did not write keeps the profile's value.
        changes = {k: getattr(self, k) for k in self.model_fields_set}
        # Validated again as a whole: an override can contradict the profile
        # (min_iterations 1000 over a profile's max_iterations 500).
        return MeasureSettings.model_validate({**base.model_dump(), **changes})


JsonDict = dict[str, Any]
