"""Silero VAD on OpenVINO: its `If` on the sample rate `sr` failed to convert; bound to the
declared 16000 by `fold-inputs`, the folded graph converts, runs without being fed `sr`, and
streamed step by step with its own state agrees with FP32 (issue 30). Without the pass, the
compile error names it."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from edgebuild import api
from tests.conftest import REPO

pytest.importorskip("openvino")
pytestmark = [pytest.mark.openvino, pytest.mark.slow,
              pytest.mark.skipif(importlib.util.find_spec("silero_vad") is None,
                                 reason="silero-vad is not installed (scripts/setup.sh "
                                 "installs it --no-deps)")]

RECIPE = REPO / "recipes" / "voice-activity.yaml"


def recipe(tmp_path: Path, passes: str) -> Path:
    """The project's recipe with only intel-cpu and its accuracy gates (latency is the e2e
    test's), its passes replaced by `passes`."""
    text = RECIPE.read_text()
    text = text.replace("models/voice_activity.py", str(REPO / "recipes/models/voice_activity.py"))
    head, _, _ = text.partition("targets:")
    gates = ("      accuracy:\n"
             "        - {dataset: speech, output: output, task: regression, "
             "max_abs_error: 0.001}\n"
             "        - {dataset: speech, output: stateN, task: regression, "
             "min_cosine: 0.9999}\n")
    path = tmp_path / "vad.yaml"
    path.write_text(f"{head}targets:\n  intel-cpu:\n    passes: {passes}\n    gates:\n{gates}")
    return path


def stage(report: Any, op: str) -> dict[str, Any]:
    stages = report.model_dump(mode="json")["stages"]
    found: dict[str, Any] = next(s for s in stages if s["id"].startswith(op))
    return found


def test_folded_vad_builds_and_agrees_with_fp32_on_openvino(tmp_path: Path) -> None:
    path = recipe(tmp_path, "[fold-inputs: {inputs: [sr]}]")
    report = api.run(path, api.RunOptions(out=tmp_path / "out", cache_dir=tmp_path / "cache"))
    assert report.exit_code == 0, report.model_dump_json(indent=1)
    folded = stage(report, "fold-inputs")["metadata"]
    assert folded["bound"] == {"sr": 16000}
    assert folded["control_flow_left"] == []
    assert folded["before"]["ops"]["If"] == 1 and "If" not in folded["after"]["ops"]
    assert stage(report, "compile@intel-cpu")["metadata"]["graph"]["ops"].get("If") is None
    gates = {g.gate: g for g in report.targets[0].gates}
    assert gates["accuracy[output]"].measured["samples"] == 487
    # the recording streamed step by step, OpenVINO carrying the state it returns
    assert "487 steps (1 sequence, each build carrying its own state)" in \
        gates["accuracy[output]"].message
    assert gates["accuracy[output]"].measured["max_abs_error"] <= 1e-3
    assert gates["accuracy[stateN]"].measured["cosine"] >= 0.9999


def test_without_the_pass_the_compile_error_names_it(tmp_path: Path) -> None:
    path = recipe(tmp_path, "[]")
    report = api.run(path, api.RunOptions(out=tmp_path / "out", cache_dir=tmp_path / "cache"))
    assert report.exit_code == 3
    compiled = stage(report, "compile@intel-cpu")
    assert compiled["outcome"] == "failed", compiled
    assert "OpenVINO could not convert the model" in compiled["message"]
    assert "'If_0'" in compiled["hint"] and "sr = 16000" in compiled["hint"]
    assert "`passes: [fold-inputs: {inputs: [sr]}]`" in compiled["hint"]
