"""The TensorRT-ready ONNX (FP16, with and without Polygraphy's sanitize) from a file with
Ultralytics-style `metadata_props`: built here, gated in ONNX Runtime, the metadata shown
under each target. The engine itself needs the device.

Polygraphy's `fold_constants` (sanitize) returns a model without `metadata_props`: the
sanitized ONNX builds, but only the default one keeps the exporter's entries."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import FASHION
from tests.integration.metadata_props import ULTRALYTICS, build_and_check, kept_metadata, project

pytest.importorskip("polygraphy", reason="sanitize needs polygraphy (extra: tensorrt-onnx)")
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not FASHION.is_dir(), reason="needs the Debian package "
                                 "dataset-fashion-mnist (scripts/setup.sh)")]


def test_tensorrt_ready_onnx_from_an_ultralytics_style_export(tmp_path: Path) -> None:
    recipe = project(tmp_path / "project", """\
        jetson-orin-nano:
          gates: {accuracy: {dataset: test, min_top1_agreement: 99, min_cosine: 0.999}}
        jetson-sanitized:
          profile: jetson-orin-nano
          options: {sanitize: true}
          gates: {accuracy: {dataset: test, min_top1_agreement: 99, min_cosine: 0.999}}
        """)
    out = tmp_path / "out"
    report = build_and_check(recipe, out)
    stages = {s["id"]: s for s in report["stages"]}
    assert stages["compile@jetson-sanitized"]["metadata"]["sanitized"]
    kept = kept_metadata(out / "artifacts" / "jetson-orin-nano" / "model.onnx")
    assert kept["names"] == str(ULTRALYTICS["names"])
