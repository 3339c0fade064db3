"""TensorRT-ready FP16 of a graph with control flow, on Silero VAD (the pretrained model in
the PyPI package silero-vad): ONNX Runtime's float16 converter cannot convert an `If`'s
subgraphs (a bare `AssertionError: ` once onnx-optimize has run, else a model ONNX Runtime
refuses to load). With the deciding input declared constant (`sr`, `value: 16000`) compile
names fold-inputs, and the folded model builds; without, the `If` stays FP32 (issue 40)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from edgebuild.errors import StageError
from edgebuild.execute.worker import context_from_recipe
from edgebuild.passes.fold_inputs import FoldInputs, FoldParams
from edgebuild.passes.onnx_optimize import OnnxOptimize, OptimizeParams
from edgebuild.registry import load_backend
from tests.integration.tensorrt.test_onnx_side import artifact, target

pytest.importorskip("onnxruntime")
pytestmark = [pytest.mark.onnxruntime,
              pytest.mark.skipif(importlib.util.find_spec("silero_vad") is None,
                                 reason="needs silero-vad (scripts/setup.sh installs it "
                                 "--no-deps)")]

SR: dict[str, Any] = {"name": "sr", "shape": [], "dtype": "int64", "dynamic_axes": {}}
AUDIO = [{"name": "input", "shape": [1, 576], "dtype": "float32", "dynamic_axes": {}},
         {"name": "state", "shape": [2, 1, 128], "dtype": "float32", "dynamic_axes": {},
          "batch_axis": None}]
OUTPUTS = ["output", "stateN"]


def silero_optimized(tmp_path: Path) -> Path:
    """silero_vad.onnx as the onnx-optimize pass writes it (onnxslim, then ONNX Runtime's
    basic level): the converter's bare `AssertionError: ` on this one."""
    import silero_vad  # type: ignore[import-untyped]

    source = Path(silero_vad.__file__).parent / "data" / "silero_vad.onnx"
    out = tmp_path / "optimized"
    out.mkdir()
    ctx = context_from_recipe("onnx-optimize", {"model": artifact(source)}, out,
                              {"inputs": [*AUDIO, {**SR, "value": 16000}], "outputs": OUTPUTS},
                              tmp_path)
    return out / OnnxOptimize().run(ctx, OptimizeParams()).main


def compile_fp16(model: Path, out: Path, inputs: list[dict[str, Any]]) -> Any:
    out.mkdir(parents=True, exist_ok=True)
    ctx = context_from_recipe("compile@jetson", {"model": artifact(model)}, out,
                              {"inputs": inputs, "outputs": OUTPUTS}, out)
    result = load_backend("tensorrt").compile(ctx, target(precision="fp16"))
    return out / result.main, result.metadata


def step(path: Path, sr: bool) -> list[np.ndarray]:
    import onnxruntime as ort

    audio = np.sin(np.arange(576, dtype=np.float32) / 7)[None] * 0.3
    feeds = {"input": audio, "state": np.zeros((2, 1, 128), np.float32)}
    if sr:
        feeds["sr"] = np.array(16000, np.int64)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return [np.asarray(v) for v in session.run(OUTPUTS, feeds)]


def test_fp16_names_fold_inputs_and_the_folded_model_builds(tmp_path: Path) -> None:
    source = silero_optimized(tmp_path)
    inputs = [*AUDIO, {**SR, "value": 16000}]
    with pytest.raises(StageError) as raised:
        compile_fp16(source, tmp_path / "unfolded", inputs)
    assert "float16 converter cannot convert the subgraphs of 'If_0'" in raised.value.message
    assert "`passes: [fold-inputs: {inputs: [sr]}]`" in (raised.value.hint or "")

    # The hint applied: fold-inputs, then the same compile.
    folded_out = tmp_path / "folded"
    folded_out.mkdir()
    ctx = context_from_recipe("fold-inputs", {"model": artifact(source)}, folded_out,
                              {"inputs": inputs, "outputs": OUTPUTS}, tmp_path)
    folded = folded_out / FoldInputs().run(ctx, FoldParams(inputs=["sr"])).main
    model, metadata = compile_fp16(folded, tmp_path / "fp16", AUDIO)
    assert metadata["fp16"]["fp16_nodes"] >= 30, metadata["fp16"]
    assert not [n for n, why in metadata["fp16"]["fp32_nodes"].items() if "subgraphs" in why]
    expected, got = step(source, sr=True), step(model, sr=False)
    assert abs(float(expected[0].item()) - float(got[0].item())) < 0.01
    assert float(np.abs(expected[1] - got[1]).max()) < 0.05


def test_control_flow_no_declared_value_decides_stays_fp32(tmp_path: Path) -> None:
    source = silero_optimized(tmp_path)
    model, metadata = compile_fp16(source, tmp_path / "fp16", [*AUDIO, SR])
    assert "If_0" in metadata["fp16"]["fp32_nodes"]
    expected, got = step(source, sr=True), step(model, sr=True)  # loads, and runs as FP32
    np.testing.assert_allclose(got[0], expected[0], atol=1e-4)
