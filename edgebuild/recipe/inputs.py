"""A recipe's `inputs:`: one model input each (docs/recipes.md#inputs).

Beyond a batch of images: a scalar (`shape: []`), an input without a sample axis
(`batch_axis: null`, a recurrent state), and the values runs use where no dataset
gives one (`value`, `value_range`). Checked against an ONNX source's own inputs by
edgebuild/recipe/onnx_inputs.py.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from edgebuild.recipe.common import Strict

__all__ = ["TensorDtype", "TensorSpec"]

TensorDtype = Literal["float32", "float16", "int8", "uint8", "int32", "int64", "bool"]


class TensorSpec(Strict):
    """One model input."""

    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_.:/-]*$", description="Input name.")
    shape: list[int] = Field(description="Example shape used for export; `[]` is a scalar "
                             "(rank 0, e.g. a sample rate).")
    dtype: TensorDtype = "float32"
    dynamic_axes: dict[int, str] = Field(
        default_factory=dict, description="Axis index -> symbolic name, e.g. `{0: batch}`."
    )
    batch_axis: Literal[0] | None = Field(
        0, description="`0`: axis 0 is the sample (batch) axis, and a dataset's sample is "
        "fed with a batch of 1. `null`: the input has no sample axis (a recurrent state "
        "`[2, 1, 128]`, a scalar): a dataset's entry is fed as it is. Default: 0, or null "
        "for a scalar.")
    value: int | float | bool | None = Field(
        None, description="The value every element takes where no dataset gives this input: "
        "latency runs, generated inputs (export checks, calibration without data) and "
        "datasets that leave the input out. E.g. `16000` for a sample rate that selects a "
        "branch, `0` for a recurrent state's first step.")
    value_range: tuple[int | float, int | float] | None = Field(
        None, description="`[low, high]`, inclusive: the range random values are drawn from "
        "for timing and generated inputs (default: integers 0..9, floats standard normal), "
        "e.g. `[0, 30521]` for token ids.")

    @model_validator(mode="before")
    @classmethod
    def _scalar_has_no_batch(cls, value: Any) -> Any:
        if isinstance(value, dict) and value.get("shape") == [] and "batch_axis" not in value:
            return {**value, "batch_axis": None}
        return value

    @field_validator("shape")
    @classmethod
    def _positive(cls, shape: list[int]) -> list[int]:
        if any(d < 1 for d in shape):
            raise ValueError("every dimension must be >= 1 (mark variable ones in dynamic_axes)")
        return shape

    @model_validator(mode="after")
    def _values_fit(self) -> TensorSpec:
        if self.batch_axis is not None and not self.shape:
            raise ValueError("a scalar (`shape: []`) has no axis 0 to be a batch axis; "
                             "remove `batch_axis`")
        if self.value is not None and self.value_range is not None:
            raise ValueError("give `value` (one fixed value) or `value_range` (random "
                             "values), not both")
        integer = self.dtype not in ("float32", "float16")
        for key in ("value", "value_range"):
            given = getattr(self, key)
            numbers = [] if given is None else [given] if not isinstance(given, tuple) \
                else list(given)
            if integer and any(float(v) != int(v) for v in numbers):
                raise ValueError(f"`{key}: {given}` is not a whole number, and input "
                                 f"'{self.name}' is {self.dtype}")
        if self.value_range is not None and self.value_range[0] > self.value_range[1]:
            raise ValueError(f"value_range {list(self.value_range)}: low is above high")
        return self

    def declaration(self) -> dict[str, Any]:
        """What stages are told (and keyed on). Keys at their defaults are left out, so
        a recipe written before they existed keeps its cache keys; readers use
        `.get("batch_axis", 0)`."""
        dumped = self.model_dump(mode="json")
        if dumped["batch_axis"] == 0:
            dumped.pop("batch_axis")
        for key in ("value", "value_range"):
            if dumped[key] is None:
                dumped.pop(key)
        return dumped
