"""`edgebuild run --ci` (or $CI=true) through the real CLI on the tiny ONNX model."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import cached_rerun, edgebuild, retimed

pytest.importorskip("onnxruntime", reason="the ONNX Runtime backend needs onnxruntime")
pytestmark = pytest.mark.onnxruntime

REPORTS = ("summary.md", "junit.xml", "report.html", "report.json")


def report_lines(stdout: str) -> dict[str, Path]:
    """The `edgebuild: NAME: PATH` lines a CI step greps for."""
    found = {}
    for line in stdout.splitlines():
        if line.startswith("edgebuild: "):
            name, _, path = line.removeprefix("edgebuild: ").partition(": ")
            found[name] = Path(path)
    return found


@pytest.mark.slow
def test_ci_from_env_prints_report_paths_and_no_carriage_return(
        tiny_project: Callable[..., Path], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    recipe = tiny_project()
    out = tmp_path / "out"
    monkeypatch.setenv("CI", "true")  # what GitHub Actions and GitLab CI set
    result = edgebuild("run", str(recipe), "--out", str(out), cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    log = result.stdout + result.stderr
    assert "\r" not in log
    # One line per stage as it ends, none of them rewritten.
    assert result.stderr.count("built ") == 6, result.stderr
    paths = report_lines(result.stdout)
    assert list(paths) == list(REPORTS)
    for name, path in paths.items():
        assert path.is_absolute() and path == (out / name).resolve() and path.is_file()
    assert "| host-cpu | latency |" in paths["summary.md"].read_text()
    # The stage logs CI uploads carry no redraws either.
    for stage_log in (out / "logs").iterdir():
        assert "\r" not in stage_log.read_text(), stage_log


@pytest.mark.slow
def test_no_ci_overrides_the_environment(tiny_project: Callable[..., Path], tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    recipe = tiny_project()
    monkeypatch.setenv("CI", "true")
    result = edgebuild("run", str(recipe), "--out", str(tmp_path / "out"), "--no-ci",
                       cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert report_lines(result.stdout) == {}
    assert "reports: " in result.stdout

    monkeypatch.delenv("CI")
    busy = retimed(tmp_path / "out")
    result = edgebuild("run", str(recipe), "--out", str(tmp_path / "out"), "--ci",
                       cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert cached_rerun(busy) in result.stdout
    assert set(report_lines(result.stdout)) == set(REPORTS)
