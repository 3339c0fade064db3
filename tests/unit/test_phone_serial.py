"""One device identity: a phone is named in the profile's `runs_on.serial`; a backend's
`device_serial` option (deprecated) is read only without it, and never names another."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from edgebuild.errors import EdgebuildError
from edgebuild.recipe.loader import load_recipe

PROFILE = """\
name: named-phone
description: An Android phone named by its adb serial (a test profile).
backend: tflite
device: {kind: cpu, arch: aarch64, os: android, name: test phone}
runs_on: {kind: adb%s}
"""

RECIPE = """\
name: tiny-phone
model: {onnx: tiny.onnx}
inputs: [{name: x, shape: [1, 4]}]
outputs: [y]
targets:
  phone:
    profile: named-phone
%s"""


def project(tiny_project: Callable[..., Path], serial: str | None, option: str | None) -> Path:
    recipe = tiny_project(RECIPE % (f"    options: {{device_serial: {option}}}\n"
                                    if option else ""))
    (recipe.parent / "targets").mkdir(exist_ok=True)
    (recipe.parent / "targets" / "named-phone.yaml").write_text(
        PROFILE % (f", serial: {serial}" if serial else ""))
    return recipe


@pytest.mark.parametrize(("serial", "option", "phone"), [
    ("AAA", None, "AAA"), (None, "BBB", "BBB"), ("AAA", "AAA", "AAA"), (None, None, None)])
def test_the_phone_is_the_profiles_else_the_options(
        tiny_project: Callable[..., Path], serial: str | None, option: str | None,
        phone: str | None) -> None:
    target = load_recipe(project(tiny_project, serial, option)).targets["phone"]
    assert target.phone_serial(target.options.get("device_serial")) == phone


def test_two_names_for_the_phone_are_refused_where_the_option_is(
        tiny_project: Callable[..., Path]) -> None:
    with pytest.raises(EdgebuildError) as info:
        load_recipe(project(tiny_project, "AAA", "BBB"))
    text = str(info.value) + info.value.hint
    assert "targets.phone.options.device_serial" in text
    assert "'BBB' names another phone than runs_on.serial 'AAA'" in text
    assert "deprecated" in text
