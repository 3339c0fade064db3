"""Silero VAD (the pretrained streaming model in the PyPI package silero-vad) on the QNN
HTP emulator in fp16, streamed step by step, with its one-step LSTM written out by
decompose-lstm: the speech probability stays in the range FP32 spans. (The −98304 issue
30 saw came from the STFT's Pow(x, 2), which the backend now writes as x·x:
test_pow_square.py; decomposed, the state also keeps cosine 1 over the stream.)"""

from __future__ import annotations

import importlib.util
import json

import pytest

from tests.conftest import SessionBuild

pytestmark = [pytest.mark.qnn, pytest.mark.slow]


@pytest.mark.skipif(importlib.util.find_spec("silero_vad") is None,
                    reason="needs silero-vad (scripts/setup.sh installs it --no-deps)")
def test_the_decomposed_lstm_keeps_the_speech_probability_in_range(
        voice_activity_build: SessionBuild) -> None:
    # recipes/voice-activity.yaml's snapdragon target (fold-inputs, decompose-lstm), read
    # from the session's build of the recipe (tests/conftest.py).
    report = json.loads((voice_activity_build.out / "report.json").read_text())
    decomposed = next(s for s in report["stages"] if s["id"].startswith("decompose-lstm"))
    assert len(decomposed["metadata"]["decomposed"]) == 1, decomposed
    snapdragon = next(t for t in report["targets"] if t["name"] == "snapdragon")
    gates = {g["gate"]: g for g in snapdragon["gates"]}
    speech, state = gates["accuracy[output]"], gates["accuracy[stateN]"]
    assert "leaves the range" not in speech["message"], speech["message"]
    assert speech["status"] == "passed", speech["message"]
    assert "487 steps" in speech["message"] and "QNN HTP emulator" in speech["message"]
    assert speech["measured"]["cosine"] > 0.99
    assert state["status"] == "passed", state["message"]  # cosine 1 over the stream
