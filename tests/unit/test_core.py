"""The shared types: dataset references found at any depth, a context that hands out
only declared inputs, and a typed target."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel

from edgebuild.core.datasets import DatasetRef, dataset_names, dataset_refs
from edgebuild.core.op import IoSpec, StageContext
from edgebuild.core.profile import Device, MeasureSettings, TargetProfile
from edgebuild.core.target import Target
from edgebuild.errors import StageError


class Inner(BaseModel):
    dataset: DatasetRef


class Params(BaseModel):
    calibration: DatasetRef | None = None
    nested: Inner | None = None
    many: list[Inner] = []
    by_name: dict[str, Inner] = {}
    label: str = "not a dataset"


def test_refs_are_found_at_any_depth() -> None:
    params = Params.model_validate({
        "calibration": "cal", "nested": {"dataset": "eval"},
        "many": [{"dataset": "a"}, {"dataset": "cal"}], "by_name": {"k": {"dataset": "b"}}})
    assert sorted(dataset_refs(params)) == [
        (("by_name", "k", "dataset"), "b"), (("calibration",), "cal"),
        (("many", "0", "dataset"), "a"), (("many", "1", "dataset"), "cal"),
        (("nested", "dataset"), "eval")]
    assert dataset_names(params) == ("a", "b", "cal", "eval")
    assert params.model_dump(mode="json")["calibration"] == "cal"  # plain strings on disk


def test_context_refuses_undeclared_inputs(tmp_path: Path) -> None:
    ctx = StageContext(stage_id="s", out=tmp_path, io=IoSpec([], ["y"]), recipe_dir=tmp_path,
                       datasets={"declared": lambda: "loaded"})  # type: ignore[dict-item]
    assert ctx.dataset("declared") == "loaded"
    with pytest.raises(StageError, match="reads dataset 'other', which it did not declare"):
        ctx.dataset("other")
    with pytest.raises(StageError, match="has no input 'model'"):
        ctx.input()
    with pytest.raises(StageError, match="reads the model source"):
        _ = ctx.model_source


def test_target_is_typed_and_variants_override() -> None:
    profile = TargetProfile(name="p", description="", backend="onnxruntime",
                            device=Device(kind="cpu", arch="x86_64", name="cpu"),
                            options={"a": 1, "b": 2})
    target = Target(name="t", profile=profile)
    variant = target.variant("t[c]", {"b": 3}, MeasureSettings(min_iterations=7))
    assert variant.options == {"a": 1, "b": 3} and variant.measure.min_iterations == 7
    assert target.options == {"a": 1, "b": 2}  # the original is untouched
    assert Target.model_validate(variant.model_dump(mode="json")) == variant


def test_a_recipe_override_can_set_null() -> None:
    """`max_busy_share: null` turns the busy check off; an unwritten key keeps the
    profile's value (a bug once dropped every null, so the check stayed on)."""
    from edgebuild.recipe.common import MeasureOverrides

    base = MeasureSettings(threads=4)
    off = MeasureOverrides.model_validate({"max_busy_share": None}).apply(base)
    assert off.max_busy_share is None and off.threads == 4
    kept = MeasureOverrides.model_validate({"threads": 2}).apply(base)
    assert kept.max_busy_share == base.max_busy_share and kept.threads == 2
