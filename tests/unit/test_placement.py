"""Where a stage runs: the backend's typed `placement`, written on each stage by the
planner (`Stage.runs_on`), read by the scheduler (`_placement`), never in a key."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

import pytest
from pydantic import ValidationError

from edgebuild.backends.base import Backend
from edgebuild.backends.declaration import Capabilities, Placement, Where
from edgebuild.backends.onnxruntime import OnnxRuntimeBackend
from edgebuild.cache.store import Store
from edgebuild.core.artifact import Artifact
from edgebuild.execute.scheduler import _placement
from edgebuild.plan import planner
from edgebuild.plan.planner import Plan, build_plan
from edgebuild.plan.resolve import KeyResolver
from edgebuild.plan.stage import Stage
from edgebuild.recipe.loader import load_recipe
from edgebuild.registry import backend_class, backend_names

ROOT = Path(__file__).resolve().parents[2]
RECIPE = """\
name: placed
model: {factory: "m.py:build"}
inputs: [{name: x, shape: [1, 4]}]
datasets:
  d: {kind: npz, path: d.npz}
targets:
  host-cpu:
    gates: {latency: {budget_ms: 5}, accuracy: {dataset: d, min_cosine: 0.99}}
  rpi4:
    gates: {latency: {budget_ms: 50}, accuracy: {dataset: d, min_cosine: 0.99}}
  rpi4-emulated:
    gates: {latency: {budget_ms: 50}, accuracy: {dataset: d, min_cosine: 0.99}}
  jetson-orin-nano:
    gates: {latency: {budget_ms: 5}, accuracy: {dataset: d, min_cosine: 0.99}}
"""


def plan_of(tmp_path: Path, text: str = RECIPE, **kwargs: Any) -> Plan:
    (tmp_path / "m.py").write_text("def build(): ...\n")
    (tmp_path / "r.yaml").write_text(text)
    return build_plan(load_recipe(tmp_path / "r.yaml"), **kwargs)


def where(plan: Plan) -> dict[str, Where]:
    return {s.id: s.runs_on for s in plan.order()}


def on_device_before(plan: Plan, stage: Stage) -> bool:
    """The scheduler's own decision before `Stage.runs_on` (op names and the backend's
    flags), each flag read from the placement field that replaced it."""
    if stage.target is None:
        return False
    placed = backend_class(plan.recipe.targets[stage.target].backend).placement
    return (stage.op == "device-build"
            or (stage.measures and not (stage.op == "infer" and placed.accuracy is Where.HOST))
            or (stage.op == "compile" and placed.compile is Where.DEVICE))


def test_placement_and_capabilities_default_to_what_a_plain_backend_does() -> None:
    assert Placement() == Placement(compile=Where.HOST, device_build=False,
                                    accuracy=Where.DEVICE)
    assert Capabilities() == Capabilities(measures_memory=False,
                                          profiles_without_latency=False, converts_nms=True)


@pytest.mark.parametrize("kwargs", [{"compile": "gpu"}, {"builds_on_device": True},
                                    {"accuracy_on_host": True}])
def test_a_wrong_placement_fails_where_it_is_declared_naming_the_field(
        kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValidationError) as info:
        Placement(**kwargs)
    assert next(iter(kwargs)) in str(info.value)


def test_the_typed_parts_are_frozen() -> None:
    with pytest.raises(ValidationError):
        Placement().compile = Where.DEVICE  # type: ignore[misc]
    with pytest.raises(ValidationError):
        Capabilities().converts_nms = False  # type: ignore[misc]


@pytest.mark.parametrize("flag", ["builds_on_device", "accuracy_on_host", "compiles_on_device",
                                  "measures_memory", "profiles_without_latency",
                                  "converts_nms"])
def test_a_backend_setting_an_old_flag_is_refused_with_its_new_spelling(flag: str) -> None:
    with pytest.raises(TypeError, match=f"sets `{flag}`, which is now declared as "
                                        r"`(placement|capabilities) = "):
        type("OldStyle", (OnnxRuntimeBackend,), {flag: True})


def test_every_built_in_backend_declares_typed_parts() -> None:
    for name in backend_names():
        declared = backend_class(name)
        assert isinstance(declared.placement, Placement), name
        assert isinstance(declared.capabilities, Capabilities), name
    assert backend_class("tensorrt").placement == Placement(device_build=True,
                                                            accuracy=Where.HOST)
    assert backend_class("onnxruntime").capabilities.measures_memory
    assert not backend_class("coreml").capabilities.converts_nms


def test_a_stage_without_a_target_cannot_run_on_a_device() -> None:
    with pytest.raises(ValueError, match="runs on a device but has no target"):
        Stage("export-onnx", "export-onnx", "{}", runs_on=Where.DEVICE)
    assert Stage("export-onnx", "export-onnx", "{}").runs_on is Where.HOST


@pytest.mark.parametrize("mode", ["run", "baseline", "profile"])
def test_every_recipe_stage_runs_where_the_scheduler_put_it_before(mode: str) -> None:
    """quickstart has a target of every built-in backend but Triton's (TensorRT's on a
    Dask worker): each of its stages is placed as the op names and flags placed it
    before. (Triton's server needs a venv of its own and declares no placement: every
    stage on the host; tests/integration/triton serves a build.)"""
    loaded = load_recipe(ROOT / "recipes" / "quickstart.yaml")
    plain = [t for t, e in loaded.recipe.targets.items() if e.search is None]
    if mode == "baseline":
        imported = {"manifest": "/b/manifest.json", "digest": "0" * 64}
        plan = build_plan(loaded, baselines=dict.fromkeys(plain, imported))
    else:
        plan = build_plan(loaded, only=plain if mode == "profile" else None,
                          profiling=mode == "profile")
    assert {loaded.targets[t].backend for t in plan.targets} >= set(backend_names()) - {"triton"}
    assert backend_class("triton").placement == Placement()
    for stage in plan.order():
        assert (stage.runs_on is Where.DEVICE) == on_device_before(plan, stage), stage.id


def test_the_planner_places_each_stage_from_the_backend_placement(tmp_path: Path) -> None:
    placed = where(plan_of(tmp_path))
    assert placed["export-onnx"] is placed["reference"] is Where.HOST
    for target in ("host-cpu", "rpi4"):  # ONNX Runtime: compile here, run there
        assert placed[f"compile@{target}"] is Where.HOST
        assert placed[f"infer@{target}"] is placed[f"measure-latency@{target}"] is Where.DEVICE
    trt = "jetson-orin-nano"  # TensorRT: the engine is built there, accuracy runs here
    assert placed[f"compile@{trt}"] is placed[f"infer@{trt}"] is Where.HOST
    assert placed[f"device-build@{trt}"] is placed[f"measure-latency@{trt}"] is Where.DEVICE


def test_a_backend_that_compiles_on_the_device_gets_its_compile_placed_there(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    class OnDevice(OnnxRuntimeBackend):
        placement: ClassVar[Placement] = Placement(compile=Where.DEVICE)

    def declared(name: str) -> type[Backend]:
        return OnDevice if name == "onnxruntime" else backend_class(name)

    monkeypatch.setattr(planner, "backend_class", declared)
    plan = plan_of(tmp_path)
    assert plan.stage("compile@rpi4").runs_on is Where.DEVICE
    assert _placement(plan, plan.stage("compile@rpi4"))[1] is not None  # sent to the board
    assert plan.stage("compile@jetson-orin-nano").runs_on is Where.HOST  # TensorRT's own


def test_the_scheduler_sends_a_device_stage_to_the_target_runner(tmp_path: Path) -> None:
    imported = {"manifest": "/b/manifest.json", "digest": "0" * 64}
    plan = plan_of(tmp_path, baselines={"jetson-orin-nano": imported})
    here = (None, None, None)
    board = (None, ("rpi4.local", plan.recipe.targets["rpi4"].runs_on.python), None)
    emulated = (None, None, ("aarch64", "cortex-a72"))
    worker = ("jetson-orin", None, None)
    expected = {
        "export-onnx": here, "compile@rpi4": here,
        "infer@rpi4": board, "measure-latency@rpi4": board,
        "compile@rpi4-emulated": here,  # built here, run on the emulated board
        "infer@rpi4-emulated": emulated, "measure-latency@rpi4-emulated": emulated,
        "compile@jetson-orin-nano": here, "infer@jetson-orin-nano": here,
        "device-build@jetson-orin-nano": worker, "measure-latency@jetson-orin-nano": worker,
        "import-baseline@jetson-orin-nano": here,
        "device-build[baseline]@jetson-orin-nano": worker,
        "compare-latency@jetson-orin-nano": worker,
        "infer@host-cpu": here,  # a device, and it is this host
    }
    assert {sid: _placement(plan, plan.stage(sid)) for sid in expected} == expected


def test_where_a_stage_runs_is_not_in_its_key(tmp_path: Path) -> None:
    plan = plan_of(tmp_path)
    resolver = KeyResolver(plan, Store(tmp_path / "cache"))
    compiled = Artifact("k", "onnx", tmp_path, {"model.onnx": "0" * 64}, {"model.onnx": 1})
    stage = plan.stage("measure-latency@rpi4")
    moved = replace(stage, runs_on=Where.HOST)
    assert resolver.key(stage, {"model": compiled}) == resolver.key(moved, {"model": compiled})
