"""QNN from a file with Ultralytics-style `metadata_props`: onnxruntime's
`qnn_preprocess_model` crashed on any metadata entry (backends/qnn/props.py); int8 now
builds, and both context models carry the model's metadata as the exporter wrote it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import FASHION
from tests.integration.metadata_props import ULTRALYTICS, build_and_check, kept_metadata, project

pytestmark = [pytest.mark.qnn, pytest.mark.slow,
              pytest.mark.skipif(not FASHION.is_dir(), reason="needs the Debian package "
                                 "dataset-fashion-mnist (scripts/setup.sh)")]


def test_int8_and_fp16_context_binaries_from_an_ultralytics_style_export(
        tmp_path: Path) -> None:
    recipe = project(tmp_path / "project", """\
        snapdragon:
          gates: {accuracy: {dataset: test, min_top1_agreement: 99, min_cosine: 0.999}}
        snapdragon-int8:
          profile: snapdragon
          options: {precision: int8, calibration_dataset: calibration}
          gates: {accuracy: {dataset: test, min_top1_agreement: 90, min_cosine: 0.98}}
        """)
    out = tmp_path / "out"
    report = build_and_check(recipe, out)
    stages = {s["id"]: s for s in report["stages"]}
    assert stages["compile@snapdragon-int8"]["metadata"]["partition"]["cpu_nodes"] == 0
    for name in ("snapdragon", "snapdragon-int8"):
        kept = kept_metadata(out / "artifacts" / name / "model_ctx.onnx")
        assert kept["names"] == str(ULTRALYTICS["names"]) and kept["task"] == "classify"
