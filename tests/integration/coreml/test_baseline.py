"""`run --baseline` with a Core ML build (issue 33, defect 2): the baseline keeps every
key the backend's runner reads (`Backend.runner_metadata`: `io` and `proxy`), from its
manifest, so its runner opens off macOS too (the weight-compression proxy) instead of
failing on a missing `proxy`. Latency itself needs macOS: "not measurable here"."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.conftest import edgebuild

pytestmark = [pytest.mark.coreml, pytest.mark.slow]

NET = """\
import torch


def build():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()).eval()
"""

RECIPE = """\
name: tiny-coreml
model: {factory: net.py:build}
inputs: [{name: x, shape: [1, 4]}]
outputs: [y]
policy: {unmeasurable: warn}
targets:
  iphone:
    gates: {latency: {budget_ms: 5}}
"""


def run(recipe: Path, out: str, *args: str) -> dict[str, Any]:
    done = edgebuild("run", str(recipe), "--out", str(recipe.parent / out), "-q", *args)
    assert "Traceback" not in done.stdout + done.stderr, done.stdout + done.stderr
    assert done.returncode == 0, done.stdout + done.stderr  # unmeasurable: warn
    report: dict[str, Any] = json.loads((recipe.parent / out / "report.json").read_text())
    return report


def test_a_core_ml_baseline_keeps_what_its_runner_reads(tmp_path: Path) -> None:
    from edgebuild.cache.store import Store
    from edgebuild.recipe.loader import load_recipe
    from edgebuild.registry import load_backend

    (tmp_path / "net.py").write_text(NET)
    recipe = tmp_path / "r.yaml"
    recipe.write_text(RECIPE)
    run(recipe, "base")
    folder = tmp_path / "base" / "artifacts" / "iphone"
    manifest = json.loads((folder / "manifest.json").read_text())
    assert set(manifest["runner_metadata"]) == {"io", "proxy"}
    assert manifest["ships"] == ["model.mlpackage"]
    proxy_file = manifest["runner_metadata"]["proxy"]["file"]
    assert proxy_file in {f["name"] for f in manifest["files"]}  # the proxy travels too

    report = run(recipe, "head", "--baseline", str(tmp_path / "base" / "report.json"))
    by_id = {s["id"]: s for s in report["stages"]}
    imported = by_id["import-baseline@iphone"]
    assert imported["metadata"]["proxy"] == manifest["runner_metadata"]["proxy"]
    assert imported["metadata"]["io"] == manifest["runner_metadata"]["io"]
    compare = by_id["compare-latency@iphone"]
    assert compare["inputs"] == ["import-baseline@iphone", "compile@iphone"]
    assert compare["outcome"] == "unmeasurable" and "needs macOS" in compare["message"]

    # The runner the comparison would open for the baseline, here: the proxy, for real.
    baseline = Store(tmp_path / "cache").lookup(imported["key"])
    assert baseline is not None
    target = load_recipe(recipe).targets["iphone"]
    with load_backend("coreml").runner(baseline, target, 1) as runner:
        (out,) = runner.infer({"x": np.ones((1, 4), np.float32)}).values()
    assert out.shape == (1, 3)
