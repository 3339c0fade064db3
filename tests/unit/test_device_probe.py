"""A device that is not attached is found out in the driver, without a worker process.

"Not measurable here" is never cached (a phone may be plugged in before the next run),
so a cached re-run asks again; the driver's `Backend.probe` must answer it as the stage
would, and the run must then say it built nothing (issue 27, item 6).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from edgebuild.core.target import Target
from edgebuild.recipe.profiles import BUILTIN_TARGETS, load_profiles
from edgebuild.registry import load_backend, load_op
from tests.conftest import edgebuild, retimed

PHONE_PROFILE = """\
name: onnx-phone
description: A phone reached over adb that runs ONNX Runtime (a test profile).
backend: onnxruntime
device: {kind: cpu, arch: aarch64, os: android, name: test phone}
runs_on: {kind: adb}
measure: {warmup_iterations: 1, min_iterations: 5, min_seconds: 0}
"""

# A host target (everything cached on the second run) and a phone whose latency is
# "not measurable here" every run.
RECIPE = """\
name: tiny-phone
model: {onnx: tiny.onnx}
inputs: [{name: x, shape: [1, 4]}]
outputs: [y]
datasets:
  samples: {kind: npz, path: samples.npz, labels: y}
targets:
  host-cpu:
    measure: {warmup_iterations: 1, min_iterations: 5, max_busy_share: null, min_seconds: 0}
    gates:
      accuracy: {dataset: samples, min_top1_agreement: 99}
      latency: {budget_ms: 1000}
  phone:
    profile: onnx-phone
    policy: {unmeasurable: warn}
    gates:
      latency: {budget_ms: 1000}
"""


def phone_project(tiny_project: Callable[..., Path]) -> Path:
    recipe = tiny_project(RECIPE)
    (recipe.parent / "targets").mkdir(exist_ok=True)
    (recipe.parent / "targets" / "onnx-phone.yaml").write_text(PHONE_PROFILE)
    return recipe


@pytest.mark.parametrize("profile", sorted(load_profiles([BUILTIN_TARGETS])))
@pytest.mark.parametrize("purpose", ["latency", "accuracy", "build"])
def test_a_probe_answers_as_the_stage_would(profile: str, purpose: str) -> None:
    """Whatever the probe says, the stage's own check would have said (checked only where
    the probe answers: the stage's check may import a vendor library otherwise)."""
    target = Target(name="t", profile=load_profiles([BUILTIN_TARGETS])[profile].profile)
    backend = load_backend(target.backend)
    reason = backend.probe(target, purpose)
    if reason is None:
        return
    if purpose == "build":
        assert reason == backend.unbuildable_reason(target)  # type: ignore[attr-defined]
    else:
        assert reason == backend.unmeasurable_reason(target, purpose)


def test_the_device_stages_ask_the_probe() -> None:
    assert load_op("measure-latency").probes == "latency"
    assert load_op("select").probes == "latency"
    assert load_op("compare-latency").probes == "latency"
    assert load_op("infer").probes == "accuracy"
    assert load_op("device-build").probes == "build"
    assert load_op("compile").probes == "compile"


def test_the_quickstarts_absent_devices_are_answered_by_their_probes() -> None:
    """Phone (QNN over adb), Mac (Core ML) and Jetson (TensorRT): none is here."""
    profiles = load_profiles([BUILTIN_TARGETS])
    for name, purpose in (("snapdragon", "latency"), ("iphone", "latency"),
                          ("jetson-orin-nano", "build")):
        target = Target(name=name, profile=profiles[name].profile)
        assert load_backend(target.backend).probe(target, purpose), name


def test_an_unknown_purpose_is_refused() -> None:
    target = Target(name="t", profile=load_profiles([BUILTIN_TARGETS])["host-cpu"].profile)
    with pytest.raises(ValueError, match="one of latency, accuracy, build"):
        load_backend("onnxruntime").probe(target, "speed")


@pytest.mark.slow
def test_a_cached_run_with_an_absent_phone_starts_no_worker(
        tiny_project: Callable[..., Path], tmp_path: Path) -> None:
    recipe = phone_project(tiny_project)
    out = tmp_path / "out"
    first = edgebuild("run", str(recipe), "--out", str(out))
    assert first.returncode == 0, first.stdout + first.stderr
    busy = retimed(out)  # figures timed under load are timed again, in a worker
    again = edgebuild("run", str(recipe), "--out", str(out))
    assert again.returncode == 0, again.stdout + again.stderr
    report = json.loads((out / "report.json").read_text())
    stages = {s["id"]: s for s in report["stages"]}
    # The counter's total is the plan's size, as the driver planned it (the CLI no longer
    # plans a second time to learn it).
    counters = re.findall(r"^\[\s*\d+/(\d+)\]", first.stderr, re.MULTILINE)
    assert counters and {int(total) for total in counters} == {len(stages)}, first.stderr
    # No worker ran: a worker-run stage records when it started (LocalExecutor).
    assert {s["id"] for s in stages.values() if s["started"] > 0} == busy
    assert {s["id"] for s in stages.values() if not s["cached"]} == \
        {"measure-latency@phone", *busy}
    probed = stages["measure-latency@phone"]
    assert probed["outcome"] == "unmeasurable"
    assert probed["message"].startswith("not measurable here: target 'phone' runs on a adb")
    assert "no worker started" in Path(probed["log"]).read_text()
    if not busy:
        assert (f"0 stages executed: nothing to build; {len(stages) - 1} of {len(stages)} "
                "cached, 1 not measurable here: no phone attached (asked again every run)"
                ) in again.stdout
