"""Shape profiles: resolution, recipe validation with file:line, and planning of accuracy
gates on several datasets."""

from __future__ import annotations

from pathlib import Path

import pytest

from edgebuild.core.op import IoSpec
from edgebuild.core.shapes import EXAMPLE, bounds, calibration_profile, fits, resolve
from edgebuild.errors import RecipeError, StageError
from edgebuild.plan.planner import build_plan
from edgebuild.recipe.loader import load_recipe

INPUTS = [
    {"name": "input_ids", "shape": [1, 32], "dynamic_axes": {1: "sequence"}},
    {"name": "attention_mask", "shape": [1, 32], "dynamic_axes": {1: "sequence"}},
    {"name": "image", "shape": [1, 3, 8, 8], "dynamic_axes": {0: "batch"}},
]


def test_without_profiles_one_example_profile_of_the_declared_shapes() -> None:
    assert resolve(INPUTS) == {EXAMPLE: {"input_ids": [1, 32], "attention_mask": [1, 32],
                                         "image": [1, 3, 8, 8]}}


def test_a_name_binds_every_input_using_it_and_unbound_axes_keep_the_example() -> None:
    profiles = resolve(INPUTS, {"short": {"sequence": 16}, "long": {"sequence": 128, "batch": 4}})
    assert list(profiles) == ["short", "long"]
    assert profiles["short"] == {"input_ids": [1, 16], "attention_mask": [1, 16],
                                 "image": [1, 3, 8, 8]}
    assert profiles["long"]["attention_mask"] == [1, 128]
    assert profiles["long"]["image"] == [4, 3, 8, 8]
    assert INPUTS[0]["shape"] == [1, 32]  # the declarations are not edited
    assert bounds(profiles)["input_ids"] == ([1, 16], [1, 128])
    with pytest.raises(ValueError, match="binds \\['seq'\\]"):
        resolve(INPUTS, {"x": {"seq": 4}})


def test_fits_treats_names_and_negative_dims_as_dynamic() -> None:
    assert fits(("batch", 3, 8, 8), [2, 3, 8, 8])
    assert fits((-1, 32), [4, 32])
    assert not fits((1, 32), [1, 64])
    assert not fits((1, 32), [1, 32, 1])


def test_fits_reads_bounded_dims_in_openvinos_notation() -> None:
    assert fits((1, 3, "16..64", "?"), [1, 3, 16, 500])
    assert fits((1, 3, "16..64", "24..96"), [1, 3, 64, 24])
    assert not fits((1, 3, "16..64", "24..96"), [1, 3, 8, 24])
    assert not fits((1, 3, "16..64", "24..96"), [1, 3, 16, 97])
    assert fits((1, "16.."), [1, 4096])  # no upper bound


def test_calibration_data_must_be_at_a_profile_or_the_built_shape() -> None:
    inputs = [{"name": "image", "shape": [1, 3, 32, 48], "dynamic_axes": {2: "h", 3: "w"}}]
    io = IoSpec(inputs, ["heat"], {"small": {"h": 16, "w": 24}, "large": {"h": 64, "w": 96}})
    assert calibration_profile("quantize", "d", {"image": [1, 3, 64, 96]}, io) == "large"
    with pytest.raises(StageError, match=r"quantize: calibration dataset 'd' has samples of "
                       r"image \[1, 3, 32, 48\], which is none of the recipe's shape profiles "
                       r"\(small: image \[1, 3, 16, 24\]; large: image \[1, 3, 64, 96\]\)"):
        calibration_profile("quantize", "d", {"image": [1, 3, 32, 48]}, io)
    # A static IR built at the example shape takes data at that shape only.
    built = {"image": [1, 3, 32, 48]}
    assert calibration_profile("q", "d", {"image": [1, 3, 32, 48]}, io, built) is None
    with pytest.raises(StageError, match=r"static IR is built at image \[1, 3, 32, 48\]"):
        calibration_profile("q", "d", {"image": [1, 3, 64, 96]}, io, built)
    # Without `shapes:` (and not static), the example shape promises nothing about data.
    plain = IoSpec(inputs, ["heat"])
    assert calibration_profile("q", "d", {"image": [1, 3, 8, 8]}, plain) is None


RECIPE = """\
model: {factory: "m.py:build"}
inputs:
  - {name: input_ids, shape: [1, 32], dtype: int64, dynamic_axes: {1: sequence}}
  - {name: attention_mask, shape: [1, 32], dtype: int64, dynamic_axes: {1: sequence}}
outputs: [embedding]
shapes:
  short: {sequence: 16}
  long: {sequence: 128}
datasets:
  short: {kind: npz, path: short.npz}
  long: {kind: npz, path: long.npz}
targets:
  host-cpu:
    gates:
      accuracy:
        - {dataset: short, task: regression, min_cosine: 0.99}
        - {dataset: long, task: regression, min_cosine: 0.99}
      latency: {budget_ms: {short: 3, long: 12}}
"""


def load(tmp_path: Path, text: str):  # type: ignore[no-untyped-def]
    (tmp_path / "m.py").write_text("def build(): ...\n")
    path = tmp_path / "r.yaml"
    path.write_text(text)
    return load_recipe(path)


def problems(tmp_path: Path, text: str) -> str:
    with pytest.raises(RecipeError) as info:
        load(tmp_path, text)
    return str(info.value)


def test_a_valid_recipe_declares_its_profiles_to_every_stage(tmp_path: Path) -> None:
    loaded = load(tmp_path, RECIPE)
    io = loaded.recipe.io_declarations()
    assert io["shapes"] == {"short": {"sequence": 16}, "long": {"sequence": 128}}
    gate = loaded.recipe.targets["host-cpu"].gates.latency
    assert gate is not None and gate.budget_for("long") == 12
    # Without `shapes:` the declarations (and so every cache key) are as before.
    plain = load(tmp_path, RECIPE.replace("shapes:\n  short: {sequence: 16}\n"
                                          "  long: {sequence: 128}\n", "").replace(
        "{short: 3, long: 12}", "5"))
    assert "shapes" not in plain.recipe.io_declarations()


def test_an_unknown_axis_name_is_an_error_at_its_line(tmp_path: Path) -> None:
    text = problems(tmp_path, RECIPE.replace("long: {sequence: 128}", "long: {sequense: 128}"))
    assert f"{tmp_path / 'r.yaml'}:8:10: shapes.long.sequense: shape profile 'long' binds " \
           "'sequense', which no input's dynamic_axes names" in text
    assert "did you mean 'sequence'?" in text


def test_a_size_below_one_is_an_error_at_its_line(tmp_path: Path) -> None:
    text = problems(tmp_path, RECIPE.replace("short: {sequence: 16}", "short: {sequence: 0}"))
    assert f"{tmp_path / 'r.yaml'}:7:11: shapes.short.sequence: Input should be greater " \
           "than or equal to 1 (got 0)" in text


def test_a_dynamic_axis_outside_the_shape_is_an_error(tmp_path: Path) -> None:
    text = problems(tmp_path, RECIPE.replace("dynamic_axes: {1: sequence}}\n  - {name: atten",
                                             "dynamic_axes: {2: sequence}}\n  - {name: atten"))
    assert "r.yaml:3:" in text and "inputs.0.dynamic_axes.2: input 'input_ids' has 2 " \
        "dimensions, so it has no axis 2" in text


def test_per_profile_budgets_name_every_profile_and_only_those(tmp_path: Path) -> None:
    text = problems(tmp_path, RECIPE.replace("{short: 3, long: 12}", "{short: 3, lng: 12}"))
    assert f"{tmp_path / 'r.yaml'}:18:" in text
    assert "targets.host-cpu.gates.latency.budget_ms.lng: no shape profile named 'lng'" in text
    assert "did you mean 'long'?" in text
    assert "budget_ms: no budget for shape profile long" in text
    text = problems(tmp_path, RECIPE.replace("{short: 3, long: 12}", "{short: -3, long: 12}"))
    assert "budget_ms.short: Input should be greater than 0 (got -3)" in text
    # Without `shapes:`, a per-profile budget has only `example` to name.
    text = problems(tmp_path, RECIPE.replace("shapes:\n  short: {sequence: 16}\n"
                                             "  long: {sequence: 128}\n", ""))
    assert "no shape profile named 'short'" in text and "declare it under `shapes:`" in text


def test_two_datasets_get_one_reference_and_one_infer_each(tmp_path: Path) -> None:
    plan = build_plan(load(tmp_path, RECIPE))
    stages = plan.targets["host-cpu"]
    assert set(stages.references) == set(stages.infers) == {"short", "long"}
    assert stages.infers["short"] != stages.infers["long"]
    for dataset, stage_id in stages.infers.items():
        stage = plan.stage(stage_id)
        assert stage.op == "infer" and stage.datasets == (dataset,) and stage.measures
        assert plan.stage(stages.references[dataset]).datasets == (dataset,)
    # Same output on two datasets is allowed; twice on one dataset is not.
    text = problems(tmp_path, RECIPE.replace("{dataset: long, task", "{dataset: short, task"))
    assert "two accuracy gates check the same output on the same dataset with the same task" in text


PER_SIZE = RECIPE.replace("""      latency: {budget_ms: {short: 3, long: 12}}
""", """      latency: {budget_ms: {short: 3, long: 12}}
  android:
    shapes: [short]
    gates: {latency: {budget_ms: {short: 4}}}
  android-long:
    profile: android
    shapes: [long, short]
    gates: {latency: {budget_ms: 20}}
""")


def test_a_target_built_at_a_chosen_profile_sees_it_as_the_example_shape(
        tmp_path: Path) -> None:
    recipe = load(tmp_path, PER_SIZE).recipe
    assert recipe.io_declarations("host-cpu") == recipe.io_declarations()
    io = recipe.io_declarations("android-long")
    assert io["shapes"] == {"long": {"sequence": 128}, "short": {"sequence": 16}}
    assert [t["shape"] for t in io["inputs"]] == [[1, 128], [1, 128]]
    io = recipe.io_declarations("android")
    assert io["shapes"] == {"short": {"sequence": 16}}
    assert [t["shape"] for t in io["inputs"]] == [[1, 16], [1, 16]]
    # A shared stage that pins shapes is told its build profile the same way.
    assert recipe.io_declarations(None, "long")["inputs"][0]["shape"] == [1, 128]


def test_targets_built_at_different_sizes_get_their_own_shape_fixing_stage(
        tmp_path: Path) -> None:
    plan = build_plan(load(tmp_path, PER_SIZE))
    stages = {s.id: s for s in (plan.graph.nodes[n]["stage"] for n in plan.graph)}
    pinned = {s.id: s.build_profile for s in stages.values() if s.op == "onnx-to-tf"}
    assert pinned == {"onnx-to-tf[short]": "short", "onnx-to-tf[long]": "long"}
    assert stages["compile@android-long"].upstream == ["onnx-to-tf[long]"]
    # Stages that do not fix shapes stay shared by every target.
    assert sum(1 for s in stages.values() if s.op == "export-onnx") == 1


def test_a_target_chooses_declared_profiles_once_and_budgets_only_those(
        tmp_path: Path) -> None:
    text = problems(tmp_path, PER_SIZE.replace("shapes: [short]", "shapes: [shrt]"))
    assert "targets.android.shapes.0: no shape profile named 'shrt'" in text
    assert "did you mean 'short'?" in text
    text = problems(tmp_path, PER_SIZE.replace("shapes: [long, short]", "shapes: [long, long]"))
    assert "targets.android-long.shapes.1: shape profile 'long' is listed twice" in text
    text = problems(tmp_path, PER_SIZE.replace("{budget_ms: {short: 4}}",
                                               "{budget_ms: {short: 4, long: 9}}"))
    assert "targets.android.gates.latency.budget_ms.long: no shape profile named 'long'" in text
    text = problems(tmp_path, PER_SIZE.replace("shapes:\n  short: {sequence: 16}\n"
                                               "  long: {sequence: 128}\n", "").replace(
        "{short: 3, long: 12}", "5").replace("{short: 4}", "5"))
    assert "targets.android.shapes: the recipe declares no shape profiles" in text
