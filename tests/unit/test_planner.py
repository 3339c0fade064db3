"""The planner merges identical stages across targets and checks formats at plan time."""

from __future__ import annotations

from pathlib import Path

import pytest

from edgebuild.errors import PlanError
from edgebuild.plan.planner import build_plan
from edgebuild.recipe.loader import load_recipe

RECIPE = """\
name: multi
model: {factory: "m.py:build"}
inputs: [{name: x, shape: [1, 4]}]
datasets:
  d: {kind: npz, path: d.npz}
passes:
  - export-onnx
  - onnx-optimize
targets:
  host-cpu:
    gates: {latency: {budget_ms: 5}, accuracy: {dataset: d, min_cosine: 0.99}}
  rpi4:
    gates: {latency: {budget_ms: 50}, accuracy: {dataset: d, min_cosine: 0.99}}
  intel-cpu: {}
"""


def plan_of(tmp_path: Path, text: str):  # type: ignore[no-untyped-def]
    (tmp_path / "m.py").write_text("def build(): ...\n")  # the factory validate looks for
    path = tmp_path / "r.yaml"
    path.write_text(text)
    return build_plan(load_recipe(path))


def test_shared_prefix_is_built_once(tmp_path: Path) -> None:
    plan = plan_of(tmp_path, RECIPE)
    ops = [s.op for s in plan.order()]
    assert ops.count("export-onnx") == 1
    assert ops.count("onnx-optimize") == 1
    assert ops.count("reference") == 1  # the FP32 reference is shared by every target
    assert ops.count("compile") == 3
    assert {s.id for s in plan.order() if s.op == "compile"} == {
        "compile@host-cpu", "compile@rpi4", "compile@intel-cpu"}
    for target in ("host-cpu", "rpi4", "intel-cpu"):
        assert plan.stage(f"compile@{target}").upstream == ["onnx-optimize"]


def test_order_is_topological_and_stable(tmp_path: Path) -> None:
    first = [s.id for s in plan_of(tmp_path, RECIPE).order()]
    second = [s.id for s in plan_of(tmp_path, RECIPE).order()]
    assert first == second
    assert first.index("export-onnx") < first.index("onnx-optimize") < first.index(
        "compile@rpi4") < first.index("measure-latency@rpi4")


def test_per_target_passes_fork_the_chain(tmp_path: Path) -> None:
    text = RECIPE.replace(
        "  intel-cpu: {}", "  intel-cpu:\n    passes: [{onnx-optimize: {simplifier: none}}]")
    plan = plan_of(tmp_path, text)
    assert plan.stage("compile@intel-cpu").upstream == ["onnx-optimize#2"]
    assert plan.stage("onnx-optimize#2").upstream == ["onnx-optimize"]


def test_export_is_inserted_when_missing(tmp_path: Path) -> None:
    plan = plan_of(tmp_path, RECIPE.replace("  - export-onnx\n", ""))
    export = plan.stage("export-onnx")
    assert export.implicit
    assert plan.stage("onnx-optimize").upstream == ["export-onnx"]


def test_pytorch_pass_after_onnx_is_a_plan_error_naming_both(tmp_path: Path) -> None:
    text = RECIPE.replace("  - onnx-optimize\n", "  - onnx-optimize\n  - export-onnx\n")
    with pytest.raises(PlanError) as info:
        plan_of(tmp_path, text)
    assert "'export-onnx' takes pytorch" in info.value.message
    assert "'onnx-optimize' before it produces onnx" in info.value.message
    # The error names the recipe line of the first target whose chain breaks.
    assert info.value.location is not None and info.value.location.line == 11
    assert str(info.value).startswith(f"{tmp_path / 'r.yaml'}:11:")


def test_missing_source_file_names_its_line(tmp_path: Path) -> None:
    from edgebuild.cache.store import Store
    from edgebuild.errors import DataError
    from edgebuild.plan.resolve import KeyResolver

    plan = plan_of(tmp_path, RECIPE.replace('{factory: "m.py:build"}', "{onnx: gone.onnx}")
                   .replace("  - export-onnx\n", ""))
    with pytest.raises(DataError) as info:
        _ = KeyResolver(plan, Store(tmp_path / "cache")).source_digest
    assert info.value.location is not None and info.value.location.line == 2
    assert "model.onnx: file" in info.value.message


def test_measurement_stages_are_marked(tmp_path: Path) -> None:
    plan = plan_of(tmp_path, RECIPE)
    measuring = {s.id for s in plan.order() if s.measures}
    assert measuring == {"infer@host-cpu", "measure-latency@host-cpu",
                         "infer@rpi4", "measure-latency@rpi4"}


def test_target_can_replace_the_recipe_passes(tmp_path: Path) -> None:
    text = RECIPE.replace("  intel-cpu: {}", "  intel-cpu:\n    inherit_passes: false\n"
                          "    passes: [prune: {ratio: 0.5}, export-onnx]")
    plan = plan_of(tmp_path, text)
    assert plan.stage("compile@intel-cpu").upstream == ["export-onnx#2"]
    assert plan.stage("export-onnx#2").upstream == ["prune"]
    assert plan.stage("prune").upstream == []


def test_search_candidates_share_identical_pass_stages(tmp_path: Path) -> None:
    text = RECIPE.replace("  intel-cpu: {}", """\
  intel-cpu: {}
  host-cpu-fast:
    profile: host-cpu
    gates: {accuracy: {dataset: d, min_cosine: 0.99}}
    search:
      candidates:
        fp16:
          passes: [quantize: {mode: fp16}]
        fp16-basic:
          passes: [quantize: {mode: fp16}]
          options: {graph_optimization_level: basic}
""")
    plan = plan_of(tmp_path, text)
    shared = "quantize[fp16]"  # named after the first candidate that needs it
    assert plan.stage("compile@host-cpu-fast[fp16]").upstream == [shared]
    assert plan.stage("compile@host-cpu-fast[fp16-basic]").upstream == [shared]
    assert plan.stage("reference").id == "reference"  # one FP32 reference for everyone
    assert sorted(plan.stage("select@host-cpu-fast").upstream) == [
        "compile@host-cpu-fast[fp16-basic]", "compile@host-cpu-fast[fp16]"]


def test_a_backend_that_takes_pytorch_compiles_from_the_source(tmp_path: Path) -> None:
    # The iphone profile's backend (coreml) accepts pytorch: no export in front of it,
    # and its compile stage declares that it reads the model source (in its key).
    text = RECIPE.replace("passes:\n  - export-onnx\n  - onnx-optimize\n", "").replace(
        "  intel-cpu: {}", "  iphone: {}")
    plan = plan_of(tmp_path, text)
    compile_stage = plan.stage("compile@iphone")
    assert compile_stage.inputs == () and compile_stage.uses_source
    assert plan.stage("compile@host-cpu").upstream == ["export-onnx"]  # ONNX Runtime: exported


def test_target_filter_keeps_only_those_targets_and_their_upstream(tmp_path: Path) -> None:
    from edgebuild.plan.planner import select_targets

    path = tmp_path / "r.yaml"
    path.write_text(RECIPE)
    (tmp_path / "m.py").write_text("def build(): ...\n")
    loaded = load_recipe(path)
    assert select_targets(loaded, ["host-*", "rpi4"]) == ["host-cpu", "rpi4"]
    plan = build_plan(loaded, only=["rpi4"])
    assert set(plan.targets) == {"rpi4"}
    assert {s.id for s in plan.order()} == {
        "export-onnx", "onnx-optimize", "reference", "compile@rpi4", "infer@rpi4",
        "measure-latency@rpi4"}
    with pytest.raises(PlanError, match=r"no target of r\.yaml matches") as info:
        select_targets(loaded, ["rpi5"])
    assert "did you mean 'rpi4'?" in info.value.hint


def test_a_baseline_is_an_input_artifact_built_on_the_device_like_this_build(
        tmp_path: Path) -> None:
    """`run --baseline`: the compared baseline is an `import-baseline` stage's artifact (so
    it travels to a worker as an input); for TensorRT, its device build (an engine)."""
    text = RECIPE.replace("  intel-cpu: {}\n", "  jetson-orin-nano:\n"
                          "    gates: {latency: {budget_ms: 5}}\n")
    (tmp_path / "m.py").write_text("def build(): ...\n")
    (tmp_path / "r.yaml").write_text(text)
    imported = {"manifest": "/baseline/manifest.json", "digest": "0" * 64}
    plan = build_plan(load_recipe(tmp_path / "r.yaml"),
                      {"host-cpu": imported, "jetson-orin-nano": imported})
    assert dict(plan.stage("compare-latency@host-cpu").inputs) == {
        "baseline": "import-baseline@host-cpu", "model": "compile@host-cpu"}
    assert plan.stage("import-baseline@host-cpu").params == imported
    trt = "jetson-orin-nano"
    assert dict(plan.stage(f"compare-latency@{trt}").inputs) == {
        "baseline": f"device-build[baseline]@{trt}", "model": f"device-build@{trt}"}
    assert dict(plan.stage(f"device-build[baseline]@{trt}").inputs) == {
        "model": f"import-baseline@{trt}"}
    assert "compare-latency@rpi4" not in plan.graph  # no baseline given for it
