"""Silero VAD (the pretrained streaming model in the PyPI package silero-vad) on TFLite,
streamed step by step in the LiteRT interpreter (issue 30). onnx2tf converted it with
every output empty (`(0, 1)`): the STFT's Slice over all three axes was applied to the
channels-last tensor's axes, cutting its time axis (length 4) at 129. onnx-to-tf now
leaves such a Slice only the axes it cuts, keeps the state (declared without a sample
axis) as it is — so the LSTM's initial state is no longer transposed and its LSTM op
converts — and maps the next state onnx2tf returns as (1, 2, 128) back to [2, 1, 128]."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from tests.conftest import edgebuild
from tests.integration.stream_models import SILERO_VAD

pytestmark = [pytest.mark.tflite, pytest.mark.slow]

RECIPE = f"""\
name: vad-tflite
{SILERO_VAD}targets:
  android:
    passes: [fold-inputs: {{inputs: [sr]}}]
    options: {{latency_on: host}}
    gates:
      accuracy:
        - {{dataset: speech, output: output, task: regression, max_abs_error: 0.001,
           min_decision_agreement: 100, threshold: 0.5}}
        - {{dataset: speech, output: stateN, task: regression, min_cosine: 0.9999}}
"""


@pytest.mark.skipif(importlib.util.find_spec("silero_vad") is None,
                    reason="needs silero-vad (scripts/setup.sh installs it --no-deps)")
def test_silero_vad_streams_on_tflite_as_fp32_does(tmp_path: Path) -> None:
    recipe = tmp_path / "vad.yaml"
    recipe.write_text(RECIPE)
    out = tmp_path / "out"
    run = edgebuild("run", str(recipe), "--out", str(out), "--cache-dir", str(tmp_path / "c"))
    assert run.returncode == 0, run.stdout + run.stderr
    report = json.loads((out / "report.json").read_text())
    converted = next(s for s in report["stages"] if s["id"].startswith("onnx-to-tf"))
    assert converted["metadata"]["kept_shape_inputs"] == ["state"]
    gates = {g["gate"]: g for g in report["targets"][0]["gates"]}
    speech, state = gates["accuracy[output]"], gates["accuracy[stateN]"]
    assert "487 steps (1 sequence, each build carrying its own state)" in speech["message"]
    assert "ai-edge-litert interpreter" in speech["message"]
    assert speech["measured"]["max_abs_error"] <= 1e-3
    assert speech["measured"]["decision_agreement"] == 100
    assert state["measured"]["cosine"] >= 0.9999
