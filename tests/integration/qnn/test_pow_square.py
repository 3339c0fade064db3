"""Silero VAD on the QNN HTP emulator in fp16 with QNN's own LSTM op: the speech
probability (a Sigmoid's output) came back −98304 on most of 487 streamed steps (issue
30, "what was seen"). The cause was the STFT's Pow(x, 2), wrong on some elements on the
HTP (then Sqrt of a negative sum): the backend writes it as x·x, and the build stays
within 0.05 of FP32 with every speech/no-speech decision FP32's."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from tests.conftest import edgebuild
from tests.integration.stream_models import SILERO_VAD

pytestmark = [pytest.mark.qnn, pytest.mark.slow]

RECIPE = f"""\
name: vad-qnn-lstm
{SILERO_VAD}policy: {{unmeasurable: warn}}
targets:
  snapdragon:
    passes: [fold-inputs: {{inputs: [sr]}}]
    gates:
      accuracy:
        - {{dataset: speech, output: output, task: regression, max_abs_error: 0.05,
           min_decision_agreement: 100, threshold: 0.5}}
"""


@pytest.mark.skipif(importlib.util.find_spec("silero_vad") is None,
                    reason="needs silero-vad (scripts/setup.sh installs it --no-deps)")
def test_the_stft_square_as_a_product_keeps_the_speech_probability(tmp_path: Path) -> None:
    recipe = tmp_path / "vad.yaml"
    recipe.write_text(RECIPE)
    out = tmp_path / "out"
    run = edgebuild("run", str(recipe), "--out", str(out), "--cache-dir", str(tmp_path / "c"))
    report = json.loads((out / "report.json").read_text())
    compiled = next(s for s in report["stages"] if s["id"].startswith("compile"))
    assert [n.rsplit("/", 1)[-1] for n in compiled["metadata"]["pow_as_mul"]] == \
        ["Pow", "Pow_1"]
    gate = report["targets"][0]["gates"][0]
    assert "leaves the range" not in gate["message"], run.stdout + run.stderr
    assert gate["status"] == "passed", gate["message"]
    assert "487 steps" in gate["message"] and "QNN HTP emulator" in gate["message"]
    assert gate["measured"]["max_abs_error"] <= 0.05
    assert gate["measured"]["decision_agreement"] == 100
