"""Per-layer comparison: where two models' intermediate tensors part ways."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from edgebuild.quant.layer_compare import compare_layers, first_divergence, worst
from tests.conftest import make_tiny_onnx

pytest.importorskip("onnxruntime", reason="runs the models with onnxruntime")


def test_identical_models_do_not_diverge(tmp_path: Path) -> None:
    a = make_tiny_onnx(tmp_path / "a.onnx")
    feeds = [{"x": np.ones((1, 4), np.float32)}]
    layers = compare_layers(a, a, feeds)
    assert [layer.op_type for layer in layers] == ["MatMul", "Relu"]
    assert all(layer.error == 0 for layer in layers)
    assert first_divergence(layers) is None


def test_perturbed_weights_are_blamed_on_the_matmul(tmp_path: Path) -> None:
    a = make_tiny_onnx(tmp_path / "a.onnx", scale=2.0)
    b = make_tiny_onnx(tmp_path / "b.onnx", scale=2.4)
    feeds = [{"x": np.random.default_rng(0).standard_normal((1, 4)).astype(np.float32)}
             for _ in range(4)]
    layers = compare_layers(a, b, feeds)
    matmul = layers[0]
    assert matmul.op_type == "MatMul"
    assert matmul.error == pytest.approx(0.2, rel=1e-3)  # a 20 % weight change
    diverged = first_divergence(layers)
    assert diverged is not None and diverged.op_type == "MatMul"
    assert worst(layers, 1)[0].op_type == "MatMul"  # the Relu adds nothing of its own


def test_non_finite_layers_are_reported_apart_and_never_ranked() -> None:
    """NaN compares false with everything: a plain sort once ranked it the worst error."""
    from edgebuild.quant.layer_compare import layer_error, non_finite

    rng = np.random.default_rng(0)
    a = rng.standard_normal((2, 8))
    layers = [
        layer_error("small", "MatMul", "t0", a, a * 1.01, 0.0),
        layer_error("nan_int8", "Softmax", "t1", a, np.full_like(a, np.nan), 0.0),
        layer_error("big", "MatMul", "t2", a, a * 1.3, 0.0),
        layer_error("inf_fp32", "Add", "t3", np.where(a > 0, np.inf, a), a, 0.0),
        layer_error("nan_both", "Div", "t4", np.full_like(a, np.nan), np.full_like(a, np.nan),
                    0.0),
    ]
    assert [layer.node for layer in worst(layers)] == ["big", "small"]
    assert worst(layers)[0].added == pytest.approx(0.3)
    assert [(layer.node, layer.non_finite) for layer in non_finite(layers)] == [
        ("nan_int8", "candidate"), ("inf_fp32", "fp32"), ("nan_both", "both")]
    diverged = first_divergence(layers)
    assert diverged is not None and diverged.node == "big"
    assert layers[1].to_json() == {"node": "nan_int8", "op_type": "Softmax", "tensor": "t1",
                                   "non_finite": "candidate"}
    assert "error" not in layers[3].to_json()
