"""A model `capture: export` cannot convert (an LSTM: "Unsupported fx node lstm") names
the capture that failed and the one to try; the traced capture converts (issue 30)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import REPO, edgebuild

pytestmark = [pytest.mark.coreml]

RECIPE = f"""\
name: lstm-coreml
model: {{factory: "{REPO / 'tests' / 'models' / 'tiny_lstm.py'}:build"}}
inputs: [{{name: x, shape: [1, 10, 8]}}]
outputs: [tags]
targets:
  iphone:
    inherit_passes: false
    policy: {{unmeasurable: warn}}
    gates: {{size: {{max_mb: 1}}}}
"""


@pytest.mark.slow
def test_an_lstm_export_cannot_convert_names_trace_which_can(tmp_path: Path) -> None:
    recipe = tmp_path / "lstm.yaml"
    recipe.write_text(RECIPE)
    failed = edgebuild("run", str(recipe), "--out", str(tmp_path / "a"))
    text = failed.stdout + failed.stderr
    assert failed.returncode != 0
    assert "captured with `capture: export`" in text and "Unsupported fx node lstm" in text
    assert "options: {capture: trace}" in text
    assert "Traceback" not in text
    recipe.write_text(RECIPE.replace("inherit_passes: false",
                                     "inherit_passes: false\n    options: {capture: trace}"))
    traced = edgebuild("run", str(recipe), "--out", str(tmp_path / "b"))
    assert traced.returncode == 0, traced.stdout + traced.stderr
    assert (tmp_path / "b" / "artifacts" / "iphone").is_dir()
