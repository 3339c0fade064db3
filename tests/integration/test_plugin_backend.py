"""A backend and a pass from a separate package, registered by entry point, build and
gate a recipe without a line of edgebuild changed (docs/extending.md's worked example:
tests/plugins/edgebuild_numpy_backend)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import REPO, make_tiny_onnx

pytest.importorskip("onnxruntime", reason="the plugin's compile check compares with it")
pytestmark = pytest.mark.onnxruntime

PLUGIN = REPO / "tests" / "plugins" / "edgebuild_numpy_backend"

PROFILE = """\
name: numpy-host
description: This machine, running models with ONNX's reference runtime (a plugin backend).
backend: numpy-reference
device: {kind: cpu, arch: x86_64, name: the build host}
options: {check_dataset: samples, check_samples: 4}
measure: {warmup_iterations: 1, min_iterations: 10, min_seconds: 0, max_busy_share: null}
"""

TARGET = """\
  numpy-host:
    passes: [{round-weights: {decimals: 3}}]
    gates:
      accuracy: {dataset: samples, min_top1_agreement: 90, min_cosine: 0.99}
      latency: {budget_ms: 1000}
      size: {max_mb: 1}
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The plugin installed for real (pip, offline), into a folder of its own."""
    target = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
         "--no-build-isolation", "--target", str(target), str(PLUGIN)],
        capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"pip cannot build the plugin offline here: {done.stderr[-500:]}")
    return target


def cli(site: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    paths = [str(site), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    return subprocess.run([sys.executable, "-m", "edgebuild", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, check=False, timeout=600)


def project(tiny_project: Callable[..., Path]) -> Path:
    recipe = tiny_project()
    make_tiny_onnx(recipe.parent / "tiny.onnx", scale=0.0123)  # weights that rounding moves
    (recipe.parent / "targets").mkdir(exist_ok=True)
    (recipe.parent / "targets" / "numpy-host.yaml").write_text(PROFILE)
    recipe.write_text(recipe.read_text() + TARGET)
    return recipe


def test_plugin_backend_and_pass_build_and_gate(site: Path, tiny_project: Callable[..., Path],
                                               tmp_path: Path) -> None:
    recipe = project(tiny_project)
    listed = cli(site, "passes", cwd=recipe.parent).stdout
    assert "round-weights" in listed and "(a plugin pass)" in listed
    assert "numpy-reference" in cli(site, "targets", cwd=recipe.parent).stdout
    out = tmp_path / "out"
    result = cli(site, "run", str(recipe), "--out", str(out), cwd=recipe.parent)
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads((out / "report.json").read_text())
    board = next(t for t in report["targets"] if t["name"] == "numpy-host")
    assert board["backend"] == "numpy-reference" and board["format"] == "onnx-reference"
    assert {g["gate"]: g["status"] for g in board["gates"]} == {
        "accuracy": "passed", "latency": "passed", "size": "passed"}
    stages = {s["id"]: s for s in report["stages"]}
    rounded = next(s for s in report["stages"] if s["op"] == "round-weights")
    assert rounded["metadata"]["values_changed"] > 0
    compiled = stages["compile@numpy-host"]
    assert compiled["metadata"]["check"]["max_abs_vs_onnxruntime"] < 1e-4
    # The backend option names a dataset: it is in the compile stage's key.
    np_samples = recipe.parent / "samples.npz"
    import numpy as np

    with np.load(np_samples) as data:
        x, y = data["x"], data["y"]
    np.savez(np_samples, x=x[::-1].copy(), y=y)
    again = cli(site, "run", str(recipe), "--out", str(out), cwd=recipe.parent)
    assert again.returncode == 0, again.stdout + again.stderr
    rerun = {s["id"]: s for s in json.loads((out / "report.json").read_text())["stages"]}
    assert rerun["compile@numpy-host"]["outcome"] == "built"
    (pass_stage,) = [s for s in rerun.values() if s["op"] == "round-weights"]
    assert pass_stage["outcome"] == "cached"  # the pass reads no dataset


def test_a_misspelt_dataset_in_a_plugin_option_is_a_recipe_error(
        site: Path, tiny_project: Callable[..., Path]) -> None:
    recipe = project(tiny_project)
    recipe.write_text(recipe.read_text().replace(
        "    passes: [{round-weights: {decimals: 3}}]\n",
        "    passes: [{round-weights: {decimals: 3}}]\n    options: {check_dataset: sample}\n"))
    result = cli(site, "validate", str(recipe), cwd=recipe.parent)
    assert result.returncode == 2
    assert "no dataset named 'sample' (backend option check_dataset)" in result.stderr
    assert f"{recipe}:" in result.stderr and "did you mean 'samples'?" in result.stderr
