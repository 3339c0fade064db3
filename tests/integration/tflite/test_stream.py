"""A stream on TFLite (issue 30): a recurrent step model (an ONNX GRU step, its state an
input and an output) converted by onnx2tf and evaluated step by step in the LiteRT
interpreter, carrying the state the .tflite itself returns; gated against FP32 streamed
the same way, and FP32 checked against a plain onnxruntime loop written here."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import edgebuild
from tests.integration.stream_models import features, plain_loop, write_recipe

pytestmark = [pytest.mark.tflite, pytest.mark.slow]


def test_tflite_streams_carrying_the_state_it_returns(tmp_path: Path) -> None:
    recipe = write_recipe(tmp_path, "android", 1e-4)
    out = tmp_path / "out"
    run = edgebuild("run", str(recipe), "--out", str(out), "--cache-dir", str(tmp_path / "cache"))
    assert run.returncode == 0, run.stdout + run.stderr
    report = json.loads((out / "report.json").read_text())
    gates = {g["gate"]: g for g in report["targets"][0]["gates"]}
    assert "100 steps (2 sequences, each build carrying its own state)" in \
        gates["accuracy[p]"]["message"]
    assert "ai-edge-litert interpreter" in gates["accuracy[p]"]["message"]
    # FP32 streamed by edgebuild is the plain loop's, and the state matters to it: so a
    # TFLite build within 1e-4 of it carried its own state through all 50 steps.
    reference = next(s for s in report["stages"] if s["id"] == "reference")
    from edgebuild.cache.store import Store

    stored = Store(tmp_path / "cache").lookup(reference["key"])
    assert stored is not None
    with np.load(stored.main) as archive:
        fp32 = archive["output:p"][:, 0]
    model = tmp_path / "gru.onnx"
    streamed = np.concatenate([plain_loop(model, f, True) for f in features(tmp_path)])
    each_from_zero = np.concatenate([plain_loop(model, f, False) for f in features(tmp_path)])
    np.testing.assert_allclose(fp32, streamed, atol=1e-5)
    assert np.abs(streamed - each_from_zero).max() > 0.05
    assert gates["accuracy[p]"]["measured"]["max_abs_error"] <= 1e-4
