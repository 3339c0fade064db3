"""ONNX Runtime, and the onnx-optimize and quantize passes, from a file with
Ultralytics-style `metadata_props`: built, gated, the metadata kept in the artifacts and
shown under each target."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import FASHION
from tests.integration.metadata_props import ULTRALYTICS, build_and_check, kept_metadata, project

pytest.importorskip("onnxruntime", reason="the ONNX Runtime backend needs onnxruntime")
pytestmark = [pytest.mark.onnxruntime, pytest.mark.slow,
              pytest.mark.skipif(not FASHION.is_dir(), reason="needs the Debian package "
                                 "dataset-fashion-mnist (scripts/setup.sh)")]


def test_host_cpu_fp32_and_static_int8_from_an_ultralytics_style_export(
        tmp_path: Path) -> None:
    recipe = project(tmp_path / "project", """\
        host-cpu:
          gates: {accuracy: {dataset: test, min_top1_agreement: 99, min_cosine: 0.999}}
        host-cpu-int8:
          profile: host-cpu
          passes:
            - quantize: {mode: static, calibration: calibration}
          gates: {accuracy: {dataset: test, min_top1_agreement: 90, min_cosine: 0.98}}
        """)
    out = tmp_path / "out"
    report = build_and_check(recipe, out)
    assert {s["id"] for s in report["stages"]} >= {"import-onnx", "onnx-optimize", "quantize"}
    for name in ("host-cpu", "host-cpu-int8"):
        kept = kept_metadata(out / "artifacts" / name / "model.onnx")
        assert kept["names"] == str(ULTRALYTICS["names"]) and kept["stride"] == "1"
