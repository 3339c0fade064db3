"""Silero VAD (the pretrained streaming model in the PyPI package silero-vad) on the QNN
HTP emulator in fp16, streamed step by step, with its one-step LSTM written out by
decompose-lstm: the speech probability stays in the range FP32 spans. (The −98304 issue
30 saw came from the STFT's Pow(x, 2), which the backend now writes as x·x:
test_pow_square.py; decomposed, the state also keeps cosine 1 over the stream.)"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from tests.conftest import edgebuild
from tests.integration.stream_models import SILERO_VAD

pytestmark = [pytest.mark.qnn, pytest.mark.slow]

RECIPE = f"""\
name: vad-qnn
{SILERO_VAD}policy: {{unmeasurable: warn}}
targets:
  snapdragon:
    passes: [fold-inputs: {{inputs: [sr]}}, decompose-lstm]
    gates:
      accuracy:
        - {{dataset: speech, output: output, task: regression, max_abs_error: 1}}
"""


@pytest.mark.skipif(importlib.util.find_spec("silero_vad") is None,
                    reason="needs silero-vad (scripts/setup.sh installs it --no-deps)")
def test_the_decomposed_lstm_keeps_the_speech_probability_in_range(tmp_path: Path) -> None:
    recipe = tmp_path / "vad.yaml"
    recipe.write_text(RECIPE)
    out = tmp_path / "out"
    run = edgebuild("run", str(recipe), "--out", str(out))
    report = json.loads((out / "report.json").read_text())
    stages = {s["id"]: s for s in report["stages"]}
    decomposed = next(s for sid, s in stages.items() if sid.startswith("decompose-lstm"))
    assert len(decomposed["metadata"]["decomposed"]) == 1, decomposed
    gate = report["targets"][0]["gates"][0]
    assert "leaves the range" not in gate["message"], run.stdout + run.stderr
    assert gate["status"] == "passed", gate["message"]
    assert "487 steps" in gate["message"] and "QNN HTP emulator" in gate["message"]
    assert gate["measured"]["cosine"] > 0.99
