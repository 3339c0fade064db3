"""A stage whose process dies in native code (SIGSEGV) names where, from faulthandler's
stack in its log, and the last line the tool logged (issue 30: "killed by SIGSEGV, see
the log", and the log ended at a TensorFlow warning)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import REPO, edgebuild

RECIPE = f"""\
name: crash
model: {{factory: "{REPO / 'tests' / 'models' / 'crashing_factory.py'}:build"}}
inputs: [{{name: x, shape: [1, 4]}}]
targets:
  host-cpu:
    gates: {{size: {{max_mb: 1}}}}
"""


@pytest.mark.slow
def test_a_segfault_names_its_site_and_the_last_logged_line(tmp_path: Path) -> None:
    recipe = tmp_path / "crash.yaml"
    recipe.write_text(RECIPE)
    result = edgebuild("run", str(recipe), "--out", str(tmp_path / "out"))
    text = result.stdout + result.stderr
    assert result.returncode == 3, text
    assert "killed by SIGSEGV in string_at (__init__.py:" in text
    assert "called from edgebuild/frontend/torch_model.py:" in text
    assert "the last thing it logged: converting node /encoder.0/Conv" in text
