"""The quantize pass on a real CNN with real Fashion-MNIST calibration data."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import onnx
import pytest

from edgebuild.core.artifact import Artifact
from edgebuild.errors import DataError, StageError
from edgebuild.passes.quantize import Quantize
from edgebuild.quant.params import QuantizeParams
from tests.integration.passes.conftest import RECIPE, context, top1

pytestmark = pytest.mark.slow


def quantize(tmp_path: Path, model: Artifact, recipe: dict[str, Any] | None = None,
             **params: Any) -> tuple[Path, dict[str, Any]]:
    ctx = context(tmp_path / "q", {"model": model}, recipe)
    result = Quantize().run(ctx, QuantizeParams(**params))
    return tmp_path / "q" / result.main, result.metadata


def ops(path: Path) -> Counter[str]:
    return Counter(node.op_type for node in onnx.load(str(path)).graph.node)


def test_static_qdq_keeps_accuracy(tmp_path: Path, fashion_onnx: Artifact) -> None:
    path, meta = quantize(tmp_path, fashion_onnx, mode="static", calibration="calib",
                          per_channel=False)
    found = ops(path)
    assert found["QuantizeLinear"] > 0 and found["DequantizeLinear"] > 0
    ctx = context(tmp_path / "eval")
    fp32, int8 = top1(fashion_onnx.main, ctx), top1(path, ctx)
    assert fp32 - int8 < 1.5, (fp32, int8)
    assert meta["layers"]["worst"], "the per-layer comparison is recorded"
    assert meta["after"]["bytes"] < meta["before"]["bytes"] / 2


def test_fp16_keeps_float32_io(tmp_path: Path, fashion_onnx: Artifact) -> None:
    path, _ = quantize(tmp_path, fashion_onnx, mode="fp16")
    model = onnx.load(str(path))
    assert model.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT
    assert any(t.data_type == onnx.TensorProto.FLOAT16 for t in model.graph.initializer)
    ctx = context(tmp_path / "eval")
    assert abs(top1(fashion_onnx.main, ctx) - top1(path, ctx)) < 0.5


def test_dynamic_uses_integer_ops(tmp_path: Path, fashion_onnx: Artifact) -> None:
    path, _ = quantize(tmp_path, fashion_onnx, mode="dynamic")
    assert ops(path)["DynamicQuantizeLinear"] > 0


def test_calibration_that_does_not_fit_the_input_names_dataset_and_input(
        tmp_path: Path, fashion_onnx: Artifact) -> None:
    nhwc = {**RECIPE["datasets"]["calib"],
            "preprocess": {**RECIPE["datasets"]["calib"]["preprocess"], "layout": "NHWC"}}
    recipe = {**RECIPE, "datasets": {**RECIPE["datasets"], "calib": nhwc}}
    with pytest.raises(DataError, match=r"dataset 'calib'.*input 'image'") as info:
        quantize(tmp_path, fashion_onnx, recipe, mode="static", calibration="calib")
    assert "channel order looks swapped" in info.value.hint


def test_unreachable_budget_is_a_clear_error(tmp_path: Path, fashion_onnx: Artifact) -> None:
    with pytest.raises(StageError, match="could not reach a top1 drop of 0 points") as info:
        quantize(tmp_path, fashion_onnx, mode="static", calibration="calib", method="minmax",
                 activation_type="int8", activation_symmetric=True,
                 accuracy_aware={"dataset": "test", "metric": "top1", "max_drop": 0,
                                 "max_iterations": 1})
    assert "most sensitive" in info.value.message


def test_accuracy_aware_records_steps(tmp_path: Path, fashion_onnx: Artifact) -> None:
    _, meta = quantize(tmp_path, fashion_onnx, mode="dynamic",
                       accuracy_aware={"dataset": "test", "max_drop": 100})
    steps = meta["accuracy_aware"]["steps"]
    assert len(steps) == 1 and steps[0]["kept_in_float"] == 0
    # Met by the full quantization: no per-node sensitivity runs were spent on it.
    assert meta["accuracy_aware"]["most_sensitive"] == []
