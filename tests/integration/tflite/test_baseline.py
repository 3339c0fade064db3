"""`run --baseline` against a search target's build (issue 33, defect 1): the chosen
candidate's compile metadata the TFLite runner reads (`io`, how recipe tensors map onto
the model's) reaches the baseline through its manifest. Before the manifest, the
baseline's metadata was looked up under `compile@<target>`, which a search target does
not have, so the runner got none and the comparison failed."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from edgebuild.errors import ExitCode
from tests.conftest import edgebuild

pytestmark = [pytest.mark.tflite, pytest.mark.slow]

HEAD = """\
name: tiny-tflite
model: {onnx: tiny.onnx}
inputs: [{name: x, shape: [1, 4]}]
outputs: [y]
datasets:
  samples: {kind: npz, path: samples.npz, labels: y}
targets:
  android:
    options: {latency_on: host}
    measure: {threads: 2, warmup_iterations: 1, min_iterations: 5, min_seconds: 0,
              max_busy_share: null}
    gates:
      accuracy: {dataset: samples, min_top1_agreement: 90}
      latency: {budget_ms: 1000}
"""
SEARCH = HEAD + """\
    search:
      candidates:
        xnnpack: {}
        builtin: {options: {delegate: cpu}}
"""


def run(recipe: Path, out: str, *args: str) -> dict[str, Any]:
    done = edgebuild("run", str(recipe), "--out", str(recipe.parent / out), "-q", *args)
    text = done.stdout + done.stderr
    assert "Traceback" not in text, text
    # Not 3 (a stage failed): 1 is a verdict, the two builds may differ in speed.
    assert done.returncode in (ExitCode.OK, ExitCode.GATE_FAILED), text
    report: dict[str, Any] = json.loads((recipe.parent / out / "report.json").read_text())
    return report


def test_a_search_targets_baseline_keeps_its_runner_metadata(
        tiny_project: Callable[..., Path]) -> None:
    base = tiny_project(SEARCH, "search.yaml")
    report = run(base, "base")
    head = tiny_project(HEAD, "plain.yaml")
    compared = run(head, "head", "--baseline", str(base.parent / "base" / "report.json"))
    (target,) = report["targets"]
    chosen = target["search"]["chosen"]
    assert chosen in ("xnnpack", "builtin"), target["search"]
    manifest = json.loads((base.parent / "base" / "artifacts" / "android" / "manifest.json")
                          .read_text())
    assert (manifest["stage"], manifest["candidate"]) == (f"compile@android[{chosen}]", chosen)
    stages = {s["id"]: s for s in report["stages"]}
    assert manifest["stage_key"] == stages[f"compile@android[{chosen}]"]["key"]
    assert manifest["runner_metadata"]["io"] == stages[f"compile@android[{chosen}]"][
        "metadata"]["io"]

    stages = {s["id"]: s for s in compared["stages"]}
    assert stages["import-baseline@android"]["metadata"]["io"] == manifest["runner_metadata"][
        "io"]
    assert stages["compare-latency@android"]["outcome"] == "built", stages[
        "compare-latency@android"]
    gates = {g["gate"]: g for g in compared["targets"][0]["gates"]}
    assert gates["regression"]["measured"]["ratio"] > 0, gates["regression"]
