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

import pytest

from tests.conftest import SessionBuild

pytestmark = [pytest.mark.tflite, pytest.mark.slow]


@pytest.mark.skipif(importlib.util.find_spec("silero_vad") is None,
                    reason="needs silero-vad (scripts/setup.sh installs it --no-deps)")
def test_silero_vad_streams_on_tflite_as_fp32_does(voice_activity_build: SessionBuild) -> None:
    # recipes/voice-activity.yaml's android target (`sr` folded, the LiteRT interpreter
    # here), read from the session's build of the recipe (tests/conftest.py).
    report = json.loads((voice_activity_build.out / "report.json").read_text())
    converted = next(s for s in report["stages"] if s["id"].startswith("onnx-to-tf"))
    assert converted["metadata"]["kept_shape_inputs"] == ["state"]
    android = next(t for t in report["targets"] if t["name"] == "android")
    gates = {g["gate"]: g for g in android["gates"]}
    speech, state = gates["accuracy[output]"], gates["accuracy[stateN]"]
    assert "487 steps (1 sequence, each build carrying its own state)" in speech["message"]
    assert "ai-edge-litert interpreter" in speech["message"]
    assert speech["measured"]["max_abs_error"] <= 1e-3
    assert speech["measured"]["decision_agreement"] == 100
    assert state["measured"]["cosine"] >= 0.9999
