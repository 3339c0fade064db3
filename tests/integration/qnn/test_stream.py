"""A stream on the QNN HTP emulator (issue 30): a GRU step model compiled for snapdragon
and evaluated step by step on the x86 HTP emulator, feeding back the state it returns."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import edgebuild
from tests.integration.stream_models import features, plain_loop, write_recipe

pytestmark = pytest.mark.qnn


@pytest.mark.slow
def test_the_htp_emulator_streams_carrying_its_state(tmp_path: Path) -> None:
    recipe = write_recipe(tmp_path, "snapdragon", 0.01)
    out = tmp_path / "out"
    run = edgebuild("run", str(recipe), "--out", str(out), "--cache-dir", str(tmp_path / "cache"))
    assert run.returncode == 0, run.stdout + run.stderr
    gates = {g["gate"]: g for g in json.loads((out / "report.json").read_text())
             ["targets"][0]["gates"]}
    message = gates["accuracy[p]"]["message"]
    assert "100 steps (2 sequences, each build carrying its own state)" in message
    assert "QNN HTP emulator" in message
    # Within 0.01 of FP32 streamed (fp16 numerics), where starting every step from zero
    # state is further off than that: the emulator's stream carried its state.
    model = tmp_path / "gru.onnx"
    streamed = np.concatenate([plain_loop(model, f, True) for f in features(tmp_path)])
    each_from_zero = np.concatenate([plain_loop(model, f, False) for f in features(tmp_path)])
    assert np.abs(streamed - each_from_zero).max() > 0.05
    assert gates["accuracy[p]"]["measured"]["max_abs_error"] <= 0.01
