"""onnx2tf as the TFLite chain runs it (issue 40, items 4 and 7): a build writes nothing in
the directory it was started from (onnx2tf made its default `saved_model/` there, even
with saving disabled, even on a failed conversion), and a failed conversion's message
carries onnx2tf's exception, not the Keras layer's arguments printed after it."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
import yaml

from edgebuild.backends.tflite.onnx_to_tf import (
    OnnxToTf,
    OnnxToTfParams,
    _convert,
    conversion_error,
)
from edgebuild.core.artifact import Artifact
from edgebuild.core.target import Target
from edgebuild.execute.worker import context_from_recipe
from edgebuild.registry import load_backend
from tests.conftest import REPO
from tests.integration.tflite.test_dynamic_shapes import heat_map_model

pytestmark = pytest.mark.tflite

INPUTS = [{"name": "image", "shape": [1, 3, 32, 48], "dtype": "float32",
           "dynamic_axes": {"2": "height", "3": "width"}}]


def artifact(folder: Path, main: str, fmt: str, metadata: dict[str, Any]) -> Artifact:
    return Artifact("test", fmt, folder, {main: ""}, {main: 0}, {**metadata, "main": main})


def test_a_tflite_build_writes_nothing_in_the_current_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    here = tmp_path / "started-here"
    here.mkdir()
    monkeypatch.chdir(here)
    heat_map_model(tmp_path / "heat.onnx")
    recipe = {"inputs": INPUTS, "outputs": ["heat"]}
    converted = tmp_path / "onnx-to-tf"
    converted.mkdir()
    ctx = context_from_recipe("onnx-to-tf", {"model": artifact(tmp_path, "heat.onnx", "onnx",
                                                                {})},
                              converted, recipe, tmp_path)
    result = OnnxToTf().run(ctx, OnnxToTfParams())
    compiled = tmp_path / "compile"
    compiled.mkdir()
    saved = artifact(converted, result.main, result.format, result.metadata)
    ctx = context_from_recipe("compile@android", {"model": saved}, compiled, recipe, tmp_path)
    profile = yaml.safe_load((REPO / "targets" / "android.yaml").read_text())
    target = Target.model_validate({"name": "android", "profile": profile})
    load_backend("tflite").compile(ctx, target)
    assert (compiled / "model.tflite").is_file()
    assert sorted(p.name for p in here.iterdir()) == []


@pytest.mark.skipif(importlib.util.find_spec("silero_vad") is None,
                    reason="needs silero-vad (scripts/setup.sh installs it --no-deps)")
def test_a_failed_conversion_says_onnx2tfs_exception(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Silero VAD's sequence export, its sequence length left dynamic: onnx2tf fails in
    the STFT's Conv inside a Keras layer, whose arguments end its output."""
    import onnx
    import silero_vad  # type: ignore[import-untyped]

    monkeypatch.chdir(tmp_path)
    source = Path(silero_vad.__file__).parent / "data" / "silero_vad_16k_sequence.onnx"
    log = _convert(source, tmp_path / "saved", keep_nchw=[], keep_shape=["h", "c"])
    assert "Call arguments received" in log  # what the message used to end with
    error = conversion_error(onnx.load(str(source)), log)
    assert error.message.startswith("onnx2tf failed on op 'Conv' (node '/stft/Conv'): "
                                    "ValueError: Depth of output (258) is not a multiple")
    assert "with input shapes: [?,1,1,704]" in error.message
    assert "onnx2tf's exception:" in (error.hint or "")
    assert "Call arguments" not in (error.hint or "") and "filters=" not in (error.hint or "")
    assert "saved_model" not in [p.name for p in tmp_path.iterdir()]
