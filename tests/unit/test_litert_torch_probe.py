"""The litert-torch backend may be left out of an install (EDGEBUILD_LITERT_TORCH=0):
without it, its compile is "not buildable here" (asked in the driver, nothing imported),
never a failed stage; every other backend's compile is left to the stage."""

from __future__ import annotations

import importlib.util

import pytest

from edgebuild.core.target import Target
from edgebuild.recipe.profiles import BUILTIN_TARGETS, load_profiles
from edgebuild.registry import load_backend


def target(name: str) -> Target:
    return Target(name=name, profile=load_profiles([BUILTIN_TARGETS])[name].profile)


def test_without_litert_torch_its_compile_is_not_buildable_here(
        monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "litert_torch" else real(name, *a))
    said = load_backend("litert-torch").probe(target("android-litert-torch"), "compile")
    assert said is not None and said.startswith(
        "not buildable here: LiteRT-Torch is not installed (litert_torch")
    assert "EDGEBUILD_LITERT_TORCH=1 bash scripts/setup.sh" in said


def test_with_it_the_stage_compiles(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object())
    assert load_backend("litert-torch").probe(target("android-litert-torch"), "compile") is None


@pytest.mark.parametrize("profile", sorted(set(load_profiles([BUILTIN_TARGETS]))
                                       - {"android-litert-torch"}))
def test_every_other_backends_compile_runs_as_before(profile: str) -> None:
    assert load_backend(target(profile).backend).probe(target(profile), "compile") is None


def test_the_summary_says_a_backend_is_missing_not_a_phone() -> None:
    """An unbuildable compile (litert-torch not installed) is a missing backend in the run's
    summary line, apart from the devices that are not attached."""
    from types import SimpleNamespace as Ns

    from edgebuild.core.profile import RunnerKind
    from edgebuild.run.summary import stage_summary

    def stage(sid: str, target: str, outcome: str = "unmeasurable") -> Ns:
        return Ns(id=sid, target=target, outcome=outcome, started=0.0)

    def on(kind: RunnerKind, backend: str) -> Ns:
        return Ns(runs_on=Ns(kind=kind, host=None), backend=backend,
                  profile=Ns(device=Ns(name="phone")))

    report = Ns(counts={"cached": 1}, stages=[
        stage("compile@host-cpu", "host-cpu", "cached"),
        stage("measure-latency@android", "android"),
        stage("compile@android-litert-torch", "android-litert-torch"),
        stage("infer@android-litert-torch", "android-litert-torch")])
    loaded = Ns(targets={"host-cpu": on(RunnerKind.HOST, "onnxruntime"),
                         "android": on(RunnerKind.ADB, "tflite"),
                         "android-litert-torch": on(RunnerKind.ADB, "litert-torch")})
    assert stage_summary(report, loaded) == (  # type: ignore[arg-type]
        "0 stages executed: nothing to build; 1 of 4 cached, 3 not measurable here: no "
        "phone attached; backend litert-torch not installed (asked again every run)")
