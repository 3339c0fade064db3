"""TFLite (onnx2tf) from a file with Ultralytics-style `metadata_props`: float32 and full
INT8 built, gated on the host interpreter, the metadata shown under each target."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import FASHION
from tests.integration.metadata_props import build_and_check, project

pytestmark = [pytest.mark.tflite, pytest.mark.slow,
              pytest.mark.skipif(not FASHION.is_dir(), reason="needs the Debian package "
                                 "dataset-fashion-mnist (scripts/setup.sh)")]


def test_android_float32_and_int8_from_an_ultralytics_style_export(tmp_path: Path) -> None:
    recipe = project(tmp_path / "project", """\
        android:
          options: {latency_on: host}
          gates: {accuracy: {dataset: test, min_top1_agreement: 99, min_cosine: 0.999}}
        android-int8:
          profile: android
          options: {precision: int8, calibration_dataset: calibration, latency_on: host}
          gates: {accuracy: {dataset: test, min_top1_agreement: 90, min_cosine: 0.98}}
        """)
    build_and_check(recipe, tmp_path / "out")
    for name in ("android", "android-int8"):
        assert (tmp_path / "out" / "artifacts" / name / "model.tflite").is_file()
