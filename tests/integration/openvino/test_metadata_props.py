"""OpenVINO from a file with Ultralytics-style `metadata_props`: built, gated, the
metadata shown under the target."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import FASHION
from tests.integration.metadata_props import build_and_check, project

pytest.importorskip("openvino", reason="the OpenVINO backend needs openvino (extra: openvino)")
pytestmark = [pytest.mark.openvino, pytest.mark.slow,
              pytest.mark.skipif(not FASHION.is_dir(), reason="needs the Debian package "
                                 "dataset-fashion-mnist (scripts/setup.sh)")]


def test_intel_cpu_from_an_ultralytics_style_export(tmp_path: Path) -> None:
    recipe = project(tmp_path / "project", """\
        intel-cpu:
          gates: {accuracy: {dataset: test, min_top1_agreement: 99, min_cosine: 0.999}}
        """)
    build_and_check(recipe, tmp_path / "out")
    assert (tmp_path / "out" / "artifacts" / "intel-cpu" / "model.xml").is_file()
